// Writer -> reader round trips, typed getters, display, and writer-side validation.
#include <filesystem>
#include <unistd.h>

#include "gguf_test_util.h"
#include "temp_dir.h"

namespace cadenza::gguf {
namespace {

using test::pattern_bytes;
using test::sample_writer;

TEST(GgufRoundTrip, EveryValueTypeAndTensorSurvives) {
  GgufWriter w = sample_writer();
  const std::vector<uint8_t> bytes = w.to_bytes();
  ASSERT_FALSE(bytes.empty());
  auto r = GgufFile::parse(bytes, "mem.gguf");
  ASSERT_TRUE(r.ok()) << r.error();
  const GgufFile& f = **r;
  test::check_invariants(f, bytes);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);

  // Metadata: order, types and values.
  const auto& md = f.metadata();
  ASSERT_EQ(md.size(), 18u);
  EXPECT_EQ(md[0].first, "general.architecture");
  EXPECT_EQ(md.back().first, "t.nested");
  EXPECT_EQ(*f.find("t.u8"), Value::u8(200));
  EXPECT_EQ(*f.find("t.i8"), Value::i8(-100));
  EXPECT_EQ(*f.find("t.u16"), Value::u16(60000));
  EXPECT_EQ(*f.find("t.i16"), Value::i16(-30000));
  EXPECT_EQ(*f.find("t.u32"), Value::u32(4000000000u));
  EXPECT_EQ(*f.find("t.i32"), Value::i32(-2000000000));
  EXPECT_EQ(*f.find("t.u64"), Value::u64(18000000000000000000ull));
  EXPECT_EQ(*f.find("t.i64"), Value::i64(-9000000000000000000ll));
  EXPECT_EQ(*f.find("t.f32"), Value::f32(0.15625f));
  EXPECT_EQ(*f.find("t.f64"), Value::f64(-1e300));
  EXPECT_EQ(*f.find("t.bool"), Value::boolean(true));
  EXPECT_EQ(*f.find("general.name"), Value::string(""));
  EXPECT_EQ(*f.find("t.strings"), Value::string_array({"<s>", "", "hello world", "\xe2\x96\x81the"}));
  EXPECT_EQ(*f.find("t.floats"), Value::f32_array({0.5f, -1.25f, 3.0f}));
  EXPECT_EQ(*f.find("t.ints"), Value::i32_array({1, -2, 3}));
  const Value* empty = f.find("t.empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->element_type(), ValueType::UINT64);
  EXPECT_TRUE(empty->as_array()->empty());
  const Value* nested = f.find("t.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->element_type(), ValueType::ARRAY);
  ASSERT_EQ(nested->as_array()->size(), 3u);
  EXPECT_EQ((*nested->as_array())[0], Value::array(ValueType::UINT8, {Value::u8(1), Value::u8(2)}));
  EXPECT_EQ((*nested->as_array())[1].element_type(), ValueType::STRING);
  EXPECT_EQ(*(*(*nested->as_array())[2].as_array())[0].as_array(),
            std::vector<Value>{Value::boolean(false)});
  EXPECT_EQ(f.find("missing"), nullptr);

  // Tensors: table and data.
  ASSERT_EQ(f.tensors().size(), 5u);
  const TensorInfo* a = f.find_tensor("a.f32");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, DType::F32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(a->num_elements(), 12);
  EXPECT_EQ(a->rows(), 3);
  EXPECT_EQ(a->nbytes, 48u);
  EXPECT_EQ(std::vector<uint8_t>(a->bytes().begin(), a->bytes().end()), pattern_bytes(48, 1));
  const TensorInfo* c = f.find_tensor("c.q8_0");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->nbytes, 4u * 34);
  EXPECT_EQ(std::vector<uint8_t>(c->bytes().begin(), c->bytes().end()), pattern_bytes(136, 3));
  const TensorInfo* e = f.find_tensor("e.q4_k");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(std::vector<uint8_t>(e->bytes().begin(), e->bytes().end()), pattern_bytes(144, 4));
  const TensorInfo* d = f.find_tensor("d.empty");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->nbytes, 0u);
  EXPECT_EQ(d->data, nullptr);
  EXPECT_EQ(d->rows(), 0);
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
}

TEST(GgufRoundTrip, WriteToDiskAndOpen) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("cadenza_gguf_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "model.gguf").string();
  GgufWriter w = sample_writer(64);
  std::vector<std::string> filled;
  ASSERT_TRUE(w.add_tensor("z.callback", DType::F16, {32, 2}, [&](std::span<uint8_t> out) {
                 filled.push_back("z");
                 ASSERT_EQ(out.size(), 128u);
                 for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i);
               }).ok());
  ASSERT_TRUE(w.write(path).ok());
  EXPECT_EQ(filled.size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));
  auto r = GgufFile::open(path);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r)->alignment(), 64u);
  EXPECT_EQ((*r)->get_uint("general.alignment").value(), 64u);
  EXPECT_EQ((*r)->file_size(), std::filesystem::file_size(path));
  for (const auto& t : (*r)->tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.name;
  const TensorInfo* z = (*r)->find_tensor("z.callback");
  ASSERT_NE(z, nullptr);
  for (size_t i = 0; i < 128; ++i) ASSERT_EQ(z->data[i], i);
  // The bytes on disk equal the in-memory image.
  EXPECT_EQ(w.to_bytes().size(), (*r)->file_size());
  std::filesystem::remove_all(dir);
}

TEST(GgufRoundTrip, Version2ReadsLikeVersion3) {
  std::vector<uint8_t> bytes = sample_writer().to_bytes();
  bytes[4] = 2;
  auto r = GgufFile::parse(bytes, "v2.gguf");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r)->version(), 2u);
  EXPECT_EQ((*r)->tensors().size(), 5u);
}

TEST(GgufGetters, TypedLookupsAndErrors) {
  const std::vector<uint8_t> bytes = sample_writer().to_bytes();
  auto r = GgufFile::parse(bytes, "g.gguf");
  ASSERT_TRUE(r.ok()) << r.error();
  const GgufFile& f = **r;
  EXPECT_EQ(f.get_string("general.architecture").value(), "llama");
  EXPECT_EQ(f.get_uint("t.u8").value(), 200u);
  EXPECT_EQ(f.get_uint("t.u64").value(), 18000000000000000000ull);
  EXPECT_EQ(f.get_int("t.i64").value(), -9000000000000000000ll);
  EXPECT_EQ(f.get_int("t.u32").value(), 4000000000ll);
  EXPECT_DOUBLE_EQ(f.get_float("t.f32").value(), 0.15625);
  EXPECT_DOUBLE_EQ(f.get_float("t.i16").value(), -30000.0);
  EXPECT_TRUE(f.get_bool("t.bool").value());
  EXPECT_EQ(f.get_string_array("t.strings").value()[3], "\xe2\x96\x81the");
  EXPECT_EQ(f.get_float_array("t.floats").value(), (std::vector<double>{0.5, -1.25, 3.0}));
  EXPECT_EQ(f.get_float_array("t.ints").value(), (std::vector<double>{1, -2, 3}));
  EXPECT_EQ(f.get_int_array("t.ints").value(), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_TRUE(f.get_int_array("t.empty").value().empty());

  EXPECT_EQ(f.get_uint("nope").error(), "g.gguf: key 'nope' missing");
  EXPECT_EQ(f.get_uint("general.architecture").error(),
            "g.gguf: key 'general.architecture' has type string, expected an unsigned integer");
  EXPECT_NE(f.get_uint("t.i8").error().find("non-negative"), std::string::npos);
  EXPECT_NE(f.get_int("t.u64").error().find("does not fit"), std::string::npos);
  EXPECT_FALSE(f.get_string("t.u8").ok());
  EXPECT_FALSE(f.get_bool("t.u8").ok());
  EXPECT_FALSE(f.get_float("t.strings").ok());
  EXPECT_EQ(f.get_string_array("t.floats").error(),
            "g.gguf: key 't.floats' has type array of f32, expected array of string");
  EXPECT_FALSE(f.get_int_array("t.floats").ok());
  EXPECT_FALSE(f.get_float_array("t.strings").ok());

  EXPECT_EQ(f.get_uint_or("nope", 7).value(), 7u);
  EXPECT_EQ(f.get_uint_or("t.u16", 7).value(), 60000u);
  EXPECT_FALSE(f.get_uint_or("general.architecture", 7).ok());
  EXPECT_DOUBLE_EQ(f.get_float_or("nope", 1.5).value(), 1.5);
  EXPECT_FALSE(f.get_bool_or("nope", false).value());
  EXPECT_FALSE(f.get_bool_or("t.u8", false).ok());
  EXPECT_EQ(f.get_string_or("nope", "x").value(), "x");
  EXPECT_FALSE(f.get_string_or("t.u8", "x").ok());
}

TEST(GgufValue, ViewsAndDisplay) {
  EXPECT_EQ(Value::i8(-1).as_uint(), std::nullopt);
  EXPECT_EQ(Value::i8(5).as_uint(), 5u);
  EXPECT_EQ(Value::u64(~0ull).as_int(), std::nullopt);
  EXPECT_EQ(Value::u8(3).as_float(), 3.0);
  EXPECT_EQ(Value::string("x").as_float(), std::nullopt);
  EXPECT_EQ(Value::boolean(true).as_uint(), std::nullopt);
  EXPECT_EQ(Value::u8(1).as_bool(), std::nullopt);
  EXPECT_EQ(Value::u8(1), Value::u8(1));
  EXPECT_FALSE(Value::u8(1) == Value::u16(1));
  EXPECT_FALSE(Value::array(ValueType::UINT8, {}) == Value::array(ValueType::INT8, {}));

  EXPECT_EQ(Value::string("a\"b\n").to_display(), "\"a\\\"b\\n\"");
  EXPECT_EQ(Value::string("abcdef").to_display(8, 3), "\"abc\"... (6 bytes)");
  EXPECT_EQ(Value::f32(0.5f).to_display(), "0.5");
  EXPECT_EQ(Value::i32(-3).to_display(), "-3");
  EXPECT_EQ(Value::boolean(false).to_display(), "false");
  std::vector<std::string> many(100, "t");
  EXPECT_EQ(Value::string_array(many).to_display(2), "[\"t\", \"t\", ... (100 items)]");
  EXPECT_EQ(Value::i32_array({1, 2}).to_display(), "[1, 2]");
  EXPECT_EQ(Value::i32_array({1, 2}).to_display(0), "[... (2 items)]");
  EXPECT_EQ(value_type_name(ValueType::FLOAT64), "f64");
}

TEST(GgufWriter, RejectsBadTensors) {
  GgufWriter w;
  ASSERT_TRUE(w.add_tensor("x", DType::F32, {2}, pattern_bytes(8, 0)).ok());
  EXPECT_NE(w.add_tensor("x", DType::F32, {2}, pattern_bytes(8, 0)).error().find("duplicate"),
            std::string::npos);
  EXPECT_FALSE(w.add_tensor("", DType::F32, {2}, pattern_bytes(8, 0)).ok());
  EXPECT_FALSE(w.add_tensor("y", DType::F32, {}, pattern_bytes(0, 0)).ok());
  EXPECT_FALSE(w.add_tensor("y", DType::F32, {1, 1, 1, 1, 1}, pattern_bytes(4, 0)).ok());
  EXPECT_FALSE(w.add_tensor("y", DType::F32, {-1}, pattern_bytes(0, 0)).ok());
  EXPECT_FALSE(w.add_tensor("y", DType::F32, {int64_t{1} << 40, int64_t{1} << 40}, nullptr).ok());
  EXPECT_NE(w.add_tensor("y", DType::Q4_0, {33}, pattern_bytes(18, 0)).error().find("block size"),
            std::string::npos);
  EXPECT_NE(w.add_tensor("y", DType::F32, {3}, pattern_bytes(8, 0)).error().find("needs 12"),
            std::string::npos);
  EXPECT_FALSE(w.add_tensor("y", static_cast<DType>(5), {3}, nullptr).ok());
  // The failed adds left nothing behind.
  auto r = GgufFile::parse(w.to_bytes(), "w.gguf");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r)->tensors().size(), 1u);
}

TEST(GgufWriter, RejectsInvalidMetadataAtWrite) {
  const cadenza::test::TempDir dir("gguf-never");
  const std::string path = dir.file("never.gguf");
  {
    GgufWriter w;
    w.set("bad", Value::array(ValueType::UINT8, {Value::u8(1), Value::string("x")}));
    EXPECT_TRUE(w.to_bytes().empty());
    auto s = w.write(path);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error().find("array item 1 has type string"), std::string::npos) << s.error();
    EXPECT_FALSE(std::filesystem::exists(path));
  }
  {
    GgufWriter w(48);
    EXPECT_TRUE(w.to_bytes().empty());
    EXPECT_NE(w.write(path).error().find("alignment 48"), std::string::npos);
  }
  {
    GgufWriter w;
    w.set("general.alignment", Value::u64(64));
    EXPECT_FALSE(w.write(path).ok());
  }
  {
    Value deep = Value::u8(1);
    for (uint32_t i = 0; i <= kMaxArrayDepth; ++i) deep = Value::array(deep.type(), {deep});
    GgufWriter w;
    w.set("deep", deep);
    EXPECT_NE(w.write(path).error().find("nested deeper"), std::string::npos);
  }
  {
    GgufWriter w;
    w.set("", Value::u8(1));
    EXPECT_FALSE(w.write(path).ok());
  }
  GgufWriter ok;
  EXPECT_NE(ok.write("/nonexistent-dir/x.gguf").error().find("/nonexistent-dir/x.gguf"),
            std::string::npos);
}

TEST(GgufWriter, SetReplacesInPlace) {
  GgufWriter w;
  w.set("a", Value::u8(1));
  w.set("b", Value::u8(2));
  w.set("a", Value::string("x"));
  auto r = GgufFile::parse(w.to_bytes(), "w.gguf");
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ((*r)->metadata().size(), 2u);
  EXPECT_EQ((*r)->metadata()[0].first, "a");
  EXPECT_EQ((*r)->metadata()[0].second, Value::string("x"));
  EXPECT_EQ((*r)->data_offset(), 64u);
}

// Found by the fuzzer: a huge (valid) alignment must not make the writer allocate it.
TEST(GgufWriter, HugeAlignmentWithoutTensorsStaysSmall) {
  GgufWriter w(uint64_t{1} << 30);
  w.set("general.name", Value::string("aligned"));
  const auto bytes = w.to_bytes();
  ASSERT_FALSE(bytes.empty());
  EXPECT_LT(bytes.size(), 100u);
  auto r = GgufFile::parse(bytes, "big-align.gguf");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r)->alignment(), uint64_t{1} << 30);
  EXPECT_TRUE((*r)->tensors().empty());
}

TEST(GgufWriter, DeepestAllowedNestingRoundTrips) {
  Value deep = Value::u8(1);
  for (uint32_t i = 0; i < kMaxArrayDepth; ++i) deep = Value::array(deep.type(), {deep});
  GgufWriter w;
  w.set("deep", deep);
  auto bytes = w.to_bytes();
  ASSERT_FALSE(bytes.empty());
  auto r = GgufFile::parse(bytes, "deep.gguf");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(*(*r)->find("deep"), deep);
}

}  // namespace
}  // namespace cadenza::gguf
