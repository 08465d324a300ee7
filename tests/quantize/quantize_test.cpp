// `cadenza quantize` end to end (quantize/quantize.h): the files it writes against the reference
// quantizer's (reference_files.json: SHA-256, size and every tensor's type of the reference's
// output for ../shared's licenses-tiny-f16 and small-llama-spm-Q8_0 at 16 targets), a quantized
// model that loads and runs, and the errors.
#include <openssl/evp.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"
#include "quantize/quantize.h"
#include "shared_data.h"
#include "temp_dir.h"

namespace cadenza::quantize {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

std::string sha256_hex(const std::vector<uint8_t>& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

Options options_for(const std::string& in, const std::string& out, const char* type) {
  Options o;
  o.input = in;
  o.output = out;
  Result<Target> t = parse_target(type);
  EXPECT_TRUE(t) << t.error();
  if (t) o.target = *t;
  o.threads = 2;
  return o;
}

// Our encoders of these types search their own scales (tensor/quant.h): valid blocks, other bytes.
bool has_own_encoder(const std::string& type) {
  return type == "q2_K" || type == "q3_K" || type == "iq4_nl" || type == "iq4_xs";
}

nlohmann::json reference_files() {
  std::ifstream f(CADENZA_QUANTIZE_REFERENCE);
  return nlohmann::json::parse(f);
}

// "model/type" for every entry of reference_files.json.
std::vector<std::string> reference_cases() {
  std::vector<std::string> cases;
  const nlohmann::json ref = reference_files();  // (a temporary's member would not outlive the loop's head)
  for (const auto& [model, targets] : ref["models"].items())
    for (const auto& [type, want] : targets.items()) cases.push_back(model + "/" + type);
  return cases;
}

class ReferenceFile : public ::testing::TestWithParam<std::string> {};

// Every tensor's type and the file size as the reference's; byte for byte the same file unless it
// holds blocks of a type whose encoder is our own.
TEST_P(ReferenceFile, MatchesTheReferenceQuantizer) {
  CADENZA_REQUIRE_SHARED();
  const std::string model = GetParam().substr(0, GetParam().find('/'));
  const std::string type = GetParam().substr(GetParam().find('/') + 1);
  const nlohmann::json want = reference_files()["models"][model][type];
  test::TempDir dir("quantize");
  const std::string in = (test::shared_dir() / "models" / (model + ".gguf")).string();
  const std::string out = dir.file("out.gguf");
  Result<Summary> s = quantize_model(options_for(in, out, type.c_str()));
  ASSERT_TRUE(s) << s.error();
  auto file = gguf::GgufFile::open(out);
  ASSERT_TRUE(file) << file.error();
  std::vector<std::string> types;
  bool own = false;
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    const std::string tn(dtype_name(t.type));
    types.push_back(t.name + ":" + tn);
    own = own || has_own_encoder(tn);
  }
  EXPECT_EQ(types, want["tensors"].get<std::vector<std::string>>());
  const std::vector<uint8_t> bytes = read_file(out);
  EXPECT_EQ(bytes.size(), want["bytes"].get<size_t>());
  EXPECT_EQ(s->file_bytes, bytes.size());
  if (own) {
    std::printf("[quantize] %s: sizes and types as the reference's; blocks of our own encoder\n",
                GetParam().c_str());
  } else {
    EXPECT_EQ(sha256_hex(bytes), want["sha256"].get<std::string>()) << "not the same bytes";
  }
}

INSTANTIATE_TEST_SUITE_P(Files, ReferenceFile, ::testing::ValuesIn(reference_cases()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '/' || c == '-') c = '_';
                           return n;
                         });

TEST(Quantize, AQuantizedModelLoadsAndAgreesWithTheOriginal) {
  CADENZA_REQUIRE_SHARED();
  test::TempDir dir("quantize");
  const std::string in = (test::shared_dir() / "models" / "licenses-tiny-f16.gguf").string();
  const std::string out = dir.file("q8_0.gguf");
  ASSERT_TRUE(quantize_model(options_for(in, out, "q8_0")));
  auto backend = kernels::make_cpu_backend({.n_threads = 1});
  std::vector<std::vector<float>> logits;
  int64_t V = 0;
  for (const std::string& path : {in, out}) {
    auto file = gguf::GgufFile::open(path);
    ASSERT_TRUE(file) << file.error();
    auto model = model::Model::load(std::shared_ptr<const gguf::GgufFile>(std::move(*file)), *backend);
    ASSERT_TRUE(model) << model.error();
    V = (*model)->config().n_vocab;
    auto session = model::Session::create(**model);
    ASSERT_TRUE(session) << session.error();
    const std::vector<int32_t> tokens = {1, 450, 7135, 310, 278, 9820, 338, 263};
    Result<std::vector<float>> l = (*session)->eval_all(tokens);
    ASSERT_TRUE(l) << l.error();
    logits.push_back(*l);
  }
  double worst = 0;
  for (size_t i = 0; i < logits[0].size(); ++i)
    worst = std::max(worst, std::fabs(double{logits[0][i]} - logits[1][i]));
  std::printf("[quantize] licenses-tiny q8_0 against f16: max |logit diff| %.4f\n", worst);
  EXPECT_LT(worst, 0.3);   // measured 0.204 (8-bit weights, and activations at 8 bits in the kernels)
  EXPECT_GT(worst, 0.0);   // it did quantize
  for (size_t pos = 0; pos < logits[0].size() / static_cast<size_t>(V); ++pos) {
    const float* a = logits[0].data() + pos * V;
    const float* b = logits[1].data() + pos * V;
    EXPECT_EQ(std::max_element(a, a + V) - a, std::max_element(b, b + V) - b) << pos;
  }
}

TEST(Quantize, AQuantizedInputIsDecodedFirstAndCounted) {
  CADENZA_REQUIRE_SHARED();
  test::TempDir dir("quantize");
  const std::string in = (test::shared_dir() / "models" / "small-llama-spm-Q8_0.gguf").string();
  Result<Summary> s = quantize_model(options_for(in, dir.file("q4_0.gguf"), "q4_0"));
  ASSERT_TRUE(s) << s.error();
  EXPECT_GT(s->requantized, 0);
  EXPECT_LT(s->bits_per_weight(), 6.0);
}

// A two-tensor model written by hand.
void write_model(const std::string& path, float poison) {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value::string("llama"));
  std::vector<float> m(64 * 4, 0.5f);
  m[64 * 2 + 7] = poison;
  std::vector<uint8_t> bytes(m.size() * 4);
  std::memcpy(bytes.data(), m.data(), bytes.size());
  ASSERT_TRUE(w.add_tensor("blk.0.attn_q.weight", DType::F32, {64, 4}, bytes));
  ASSERT_TRUE(w.write(path));
}

TEST(Quantize, BadInputsAreClearErrors) {
  test::TempDir dir("quantize");
  // A non-finite weight: named by tensor and row, and no output file is left.
  const std::string nan_model = dir.file("nan.gguf");
  write_model(nan_model, std::numeric_limits<float>::quiet_NaN());
  Result<Summary> s = quantize_model(options_for(nan_model, dir.file("out.gguf"), "q8_0"));
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("blk.0.attn_q.weight"), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("row 2"), std::string::npos) << s.error();
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.gguf")));
  // A good one converts; then truncated, it does not open.
  const std::string good = dir.file("good.gguf");
  write_model(good, 1.0f);
  ASSERT_TRUE(quantize_model(options_for(good, dir.file("good-q8.gguf"), "q8_0")));
  std::vector<uint8_t> bytes = read_file(good);
  bytes.resize(bytes.size() - 100);
  const std::string cut = dir.file("cut.gguf");
  std::ofstream(cut, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                             static_cast<std::streamsize>(bytes.size()));
  s = quantize_model(options_for(cut, dir.file("cut-q8.gguf"), "q8_0"));
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("cut.gguf"), std::string::npos) << s.error();
  // Over itself.
  s = quantize_model(options_for(good, good, "q8_0"));
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("overwrite"), std::string::npos) << s.error();
  // Missing.
  EXPECT_FALSE(quantize_model(options_for(dir.file("none.gguf"), dir.file("x.gguf"), "q8_0")));
}

}  // namespace
}  // namespace cadenza::quantize
