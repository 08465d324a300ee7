// quantize/imatrix.h (the file: round trip and damaged or foreign files) and `cadenza quantize
// --imatrix` (quantize/quantize.h): weighted tensors counted, the imatrix keys written, and an
// imatrix of another model refused.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "quantize/imatrix.h"
#include "quantize/quantize.h"
#include "synth/synth.h"
#include "temp_dir.h"
#include "test_models.h"

namespace cadenza::quantize {
namespace {

Imatrix sample() {
  Imatrix im;
  ImatrixEntry& a = im.entry("blk.0.attn_q.weight", 4, 1);
  a.sum2 = {1, 2, 3, 4.5};
  a.counts = {3};
  ImatrixEntry& b = im.entry("blk.0.ffn_up_exps.weight", 2, 3);
  b.sum2 = {1, 1, 0, 0, 8, 2};
  b.counts = {1, 0, 2};
  im.datasets = {"calib.txt"};
  im.chunk_count = 7;
  im.chunk_size = 512;
  return im;
}

TEST(Imatrix, RoundTripsThroughItsGgufFile) {
  const test::TempDir dir("imatrix");
  const std::string path = dir.file("im.gguf");
  ASSERT_TRUE(write_imatrix(sample(), path));
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file) << file.error();
  EXPECT_EQ(*(*file)->get_string("general.type"), "imatrix");
  const gguf::TensorInfo* t = (*file)->find_tensor("blk.0.ffn_up_exps.weight.in_sum2");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 3}));
  ASSERT_NE((*file)->find_tensor("blk.0.ffn_up_exps.weight.counts"), nullptr);
  EXPECT_EQ((*file)->find_tensor("blk.0.ffn_up_exps.weight.counts")->shape, (std::vector<int64_t>{1, 3}));

  auto read = read_imatrix(path);
  ASSERT_TRUE(read) << read.error();
  const Imatrix want = sample();
  EXPECT_EQ(read->datasets, want.datasets);
  EXPECT_EQ(read->chunk_count, 7);
  EXPECT_EQ(read->chunk_size, 512);
  ASSERT_EQ(read->entries.size(), 2u);
  for (const auto& [name, e] : want.entries) {
    const ImatrixEntry& g = read->entries.at(name);
    EXPECT_EQ(g.cols, e.cols);
    EXPECT_EQ(g.matrices, e.matrices);
    EXPECT_EQ(g.sum2, e.sum2);
    EXPECT_EQ(g.counts, e.counts);
  }
  std::vector<float> imp;
  ASSERT_TRUE(read->importance("blk.0.ffn_up_exps.weight", 2, imp));
  EXPECT_EQ(imp, (std::vector<float>{4, 1}));
  EXPECT_FALSE(read->importance("blk.0.ffn_up_exps.weight", 1, imp));  // saw no token
}

TEST(Imatrix, DamagedOrForeignFilesAreClearErrors) {
  const test::TempDir dir("imatrix-bad");
  {
    std::ofstream(dir.file("dat")) << "\x02\x00\x00\x00legacy imatrix.dat bytes";
    auto r = read_imatrix(dir.file("dat"));
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find(".dat format"), std::string::npos) << r.error();
  }
  {
    gguf::GgufWriter w;
    w.set("general.architecture", gguf::Value::string("llama"));
    ASSERT_TRUE(w.write(dir.file("model.gguf")));
    auto r = read_imatrix(dir.file("model.gguf"));
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find("not an imatrix"), std::string::npos) << r.error();
  }
  auto with = [&](const std::string& name, std::vector<float> sum2, bool counts) {
    gguf::GgufWriter w;
    w.set("general.type", gguf::Value::string("imatrix"));
    std::vector<uint8_t> bytes(sum2.size() * 4);
    std::memcpy(bytes.data(), sum2.data(), bytes.size());
    EXPECT_TRUE(w.add_tensor("a.weight.in_sum2", DType::F32, {static_cast<int64_t>(sum2.size()), 1}, bytes));
    if (counts) {
      std::vector<uint8_t> one(4);
      const float c = 1;
      std::memcpy(one.data(), &c, 4);
      EXPECT_TRUE(w.add_tensor("a.weight.counts", DType::F32, {1, 1}, one));
    }
    EXPECT_TRUE(w.write(dir.file(name)));
    return read_imatrix(dir.file(name));
  };
  auto missing = with("missing.gguf", {1, 2}, false);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("has no"), std::string::npos) << missing.error();
  auto negative = with("negative.gguf", {1, -2}, true);
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().find("not a sum of squares"), std::string::npos) << negative.error();
  auto nan = with("nan.gguf", {1, NAN}, true);
  ASSERT_FALSE(nan);
  EXPECT_TRUE(with("good.gguf", {1, 2}, true));
  auto absent = read_imatrix(dir.file("absent.gguf"));
  EXPECT_FALSE(absent);
}

// An imatrix for the tiny model (rows of 64 and 128: the 32-block types), by hand: every matrix
// but the embedding and the head, with importance rising across the columns.
Imatrix imatrix_for(const gguf::GgufFile& model, int64_t wrong_cols = 0) {
  Imatrix im;
  for (const gguf::TensorInfo& t : model.tensors()) {
    if (t.shape.size() < 2 || t.name == "token_embd.weight" || t.name == "output.weight") continue;
    const int64_t cols = wrong_cols > 0 ? wrong_cols : t.shape[0];
    ImatrixEntry& e = im.entry(t.name, cols, 1);
    for (int64_t c = 0; c < cols; ++c) e.sum2[static_cast<size_t>(c)] = 1.0 + static_cast<double>(c * c);
    e.counts[0] = 10;
  }
  im.datasets = {"by hand"};
  im.chunk_count = 1;
  im.chunk_size = 10;
  return im;
}

TEST(Imatrix, QuantizeWeighsTheTensorsItHoldsAndRefusesAnotherModels) {
  const test::TempDir dir("imatrix-quantize");
  const std::string model = dir.file("tiny.gguf");
  ASSERT_TRUE(synth::write_synthetic_model(test::tiny_model_options(9), model));
  auto file = gguf::GgufFile::open(model);
  ASSERT_TRUE(file) << file.error();
  const Imatrix im = imatrix_for(**file);
  ASSERT_TRUE(write_imatrix(im, dir.file("im.gguf")));

  Options o;
  o.input = model;
  o.target = *parse_target("q4_0");
  o.threads = 2;
  o.output = dir.file("plain.gguf");
  auto plain = quantize_model(o);
  ASSERT_TRUE(plain) << plain.error();
  EXPECT_EQ(plain->weighted, 0);
  o.imatrix = dir.file("im.gguf");
  o.output = dir.file("weighted.gguf");
  auto weighted = quantize_model(o);
  ASSERT_TRUE(weighted) << weighted.error();
  EXPECT_EQ(weighted->weighted, static_cast<int>(im.entries.size()));
  EXPECT_EQ(weighted->bytes_out, plain->bytes_out);  // the same types: the same tensor bytes
  auto out = gguf::GgufFile::open(o.output);
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(*(*out)->get_string("quantize.imatrix.file"), o.imatrix);
  EXPECT_EQ(*(*out)->get_int("quantize.imatrix.entries_count"), static_cast<int64_t>(im.entries.size()));
  // Different blocks where the importance differs from even.
  const gguf::TensorInfo* a = (*out)->find_tensor("blk.0.attn_q.weight");
  auto plain_file = gguf::GgufFile::open(dir.file("plain.gguf"));
  const gguf::TensorInfo* b = (*plain_file)->find_tensor("blk.0.attn_q.weight");
  ASSERT_TRUE(a && b);
  EXPECT_NE(std::vector<uint8_t>(a->data, a->data + a->nbytes), std::vector<uint8_t>(b->data, b->data + b->nbytes));

  // Another model's imatrix: a row length that differs, or names that match nothing.
  ASSERT_TRUE(write_imatrix(imatrix_for(**file, 96), dir.file("other.gguf")));
  o.imatrix = dir.file("other.gguf");
  o.output = dir.file("other-out.gguf");
  auto other = quantize_model(o);
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().find("another model"), std::string::npos) << other.error();
  EXPECT_FALSE(std::filesystem::exists(o.output));
  Imatrix unrelated;
  ImatrixEntry& e = unrelated.entry("model.layers.0.q_proj", 64, 1);
  e.counts[0] = 1;
  ASSERT_TRUE(write_imatrix(unrelated, dir.file("unrelated.gguf")));
  o.imatrix = dir.file("unrelated.gguf");
  auto none = quantize_model(o);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("none of the quantized tensors"), std::string::npos) << none.error();
}

}  // namespace
}  // namespace cadenza::quantize
