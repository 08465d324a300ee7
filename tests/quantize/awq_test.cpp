// quantize/awq.h (`cadenza quantize --imatrix F --awq`): the fold alone (a fixed alpha, written in
// f32) computes the original model's logits; the search never loses on its own measure; the bad
// combinations are clear errors.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"
#include "quantize/awq.h"
#include "quantize/imatrix.h"
#include "quantize/quantize.h"
#include "synth/synth.h"
#include "temp_dir.h"
#include "test_models.h"

namespace cadenza::quantize {
namespace {

// Importance spread over about e^+-3 (log-normal), as real activations are: the scales that
// follow from it are far from 1, so a fold in the wrong place shows in the logits.
Imatrix spread_imatrix(const gguf::GgufFile& model, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.5);
  Imatrix im;
  for (const gguf::TensorInfo& t : model.tensors()) {
    if (t.shape.size() != 2 || t.name == "token_embd.weight" || t.name == "output.weight") continue;
    ImatrixEntry& e = im.entry(t.name, t.shape[0], 1);
    for (double& v : e.sum2) v = 10.0 * std::exp(normal(rng));
    e.counts[0] = 10;
  }
  // q, k and v read the same input, as do gate and up: one statistic each, as a real run records.
  for (auto& [name, e] : im.entries) {
    for (const char* from : {"attn_k.weight", "attn_v.weight", "ffn_up.weight"}) {
      const size_t at = name.find(from);
      if (at == std::string::npos) continue;
      const std::string same = name.substr(0, at) + (std::string(from) == "ffn_up.weight" ? "ffn_gate.weight" : "attn_q.weight");
      e.sum2 = im.entries.at(same).sum2;
    }
  }
  im.datasets = {"random"};
  im.chunk_count = 1;
  im.chunk_size = 10;
  return im;
}

std::vector<float> logits_of(const std::string& path, const std::vector<int32_t>& tokens) {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  Result<std::unique_ptr<model::Model>> m = model::Model::open(path, *backend);
  EXPECT_TRUE(m) << m.error();
  if (!m) return {};
  // An f32 KV store: the fold changes V's values, so an f16 store would round them differently.
  Result<std::unique_ptr<model::Session>> s = model::Session::create(**m, {.kv_type = DType::F32});
  EXPECT_TRUE(s) << s.error();
  if (!s) return {};
  Result<std::vector<float>> l = (*s)->eval_all(tokens);  // every position
  EXPECT_TRUE(l) << l.error();
  return l ? *l : std::vector<float>{};
}

std::vector<float> values(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t || t->type != DType::F32) return {};
  std::vector<float> v(static_cast<size_t>(t->num_elements()));
  std::memcpy(v.data(), t->data, v.size() * sizeof(float));
  return v;
}

struct Family {
  const char* arch;
  bool qkv_bias, qk_norm;
};

class AwqFold : public ::testing::TestWithParam<Family> {};

// The fold alone: f32 out, so nothing is rounded but the floats of the products.
TEST_P(AwqFold, FoldedModelInFullPrecisionGivesTheSameLogits) {
  const Family fam = GetParam();
  const test::TempDir dir("awq-fold");
  synth::SynthOptions so = test::tiny_model_options(21);
  so.shape.arch = fam.arch;
  so.shape.qkv_bias = fam.qkv_bias;
  so.shape.qk_norm = fam.qk_norm;
  const std::string model = dir.file("model.gguf");
  ASSERT_TRUE(synth::write_synthetic_model(so, model));
  auto in = gguf::GgufFile::open(model);
  ASSERT_TRUE(in) << in.error();
  ASSERT_TRUE(write_imatrix(spread_imatrix(**in, 5), dir.file("im.gguf")));

  Options o;
  o.input = model;
  o.output = dir.file("folded.gguf");
  o.target = *parse_target("f32");
  o.imatrix = dir.file("im.gguf");
  o.awq.enabled = true;
  o.awq.alpha = 1.0f;
  o.threads = 2;
  auto s = quantize_model(o);
  ASSERT_TRUE(s) << s.error();
  EXPECT_TRUE(s->awq_skipped.empty()) << s->awq_skipped.front();
  ASSERT_EQ(s->awq_groups.size(), static_cast<size_t>(4 * so.shape.n_layer));
  for (const AwqGroup& g : s->awq_groups) EXPECT_EQ(g.alpha, 1.0f) << g.name;

  // Every fold point changed its tensors...
  auto out = gguf::GgufFile::open(o.output);
  ASSERT_TRUE(out) << out.error();
  for (const char* name : {"blk.1.attn_norm.weight", "blk.1.ffn_norm.weight", "blk.1.attn_q.weight",
                           "blk.1.attn_v.weight", "blk.1.attn_output.weight", "blk.1.ffn_up.weight",
                           "blk.1.ffn_down.weight"}) {
    EXPECT_NE(values(**in, name), values(**out, name)) << name;
  }
  if (fam.qkv_bias) {
    EXPECT_NE(values(**in, "blk.0.attn_v.bias"), values(**out, "blk.0.attn_v.bias"));
  }
  EXPECT_EQ(*(*out)->get_int("quantize.awq.groups"), 4 * so.shape.n_layer);
  // ...and the model computes the same function.
  const std::vector<int32_t> tokens = {1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};
  const std::vector<float> a = logits_of(model, tokens), b = logits_of(o.output, tokens);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  float top = 0, worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    top = std::max(top, std::abs(a[i]));
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  EXPECT_LT(worst, 1e-4f * std::max(1.0f, top)) << "largest logit " << top;
}

INSTANTIATE_TEST_SUITE_P(Families, AwqFold,
                         ::testing::Values(Family{"llama", false, false}, Family{"qwen2", true, false},
                                           Family{"qwen3", false, true}),
                         [](const auto& info) { return std::string(info.param.arch); });

// The search: alpha on the grid, never a larger weighted error than no scaling, smaller somewhere
// at 4 bits, and the file loads.
TEST(Awq, SearchNeverLosesOnItsMeasure) {
  const test::TempDir dir("awq-search");
  const std::string model = dir.file("model.gguf");
  ASSERT_TRUE(synth::write_synthetic_model(test::tiny_model_options(22), model));
  auto in = gguf::GgufFile::open(model);
  ASSERT_TRUE(in) << in.error();
  ASSERT_TRUE(write_imatrix(spread_imatrix(**in, 6), dir.file("im.gguf")));
  Options o;
  o.input = model;
  o.output = dir.file("q4.gguf");
  o.target = *parse_target("q4_0");
  o.imatrix = dir.file("im.gguf");
  o.awq.enabled = true;
  o.threads = 2;
  auto s = quantize_model(o);
  ASSERT_TRUE(s) << s.error();
  ASSERT_EQ(s->awq_groups.size(), 8u);
  int better = 0;
  for (const AwqGroup& g : s->awq_groups) {
    EXPECT_GE(g.alpha, 0.0f) << g.name;
    EXPECT_LE(g.alpha, 1.0f) << g.name;
    EXPECT_NEAR(g.alpha * 20, std::round(g.alpha * 20), 1e-4) << g.name;
    EXPECT_GT(g.error_plain, 0) << g.name;
    EXPECT_LE(g.error, g.error_plain) << g.name;
    better += g.error < g.error_plain ? 1 : 0;
  }
  EXPECT_GT(better, 0);
  EXPECT_EQ(logits_of(o.output, {1, 72, 101}).size(), 3u * 300u);
}

TEST(Awq, BadCombinationsAreClearErrors) {
  const test::TempDir dir("awq-errors");
  const std::string model = dir.file("model.gguf");
  ASSERT_TRUE(synth::write_synthetic_model(test::tiny_model_options(23), model));
  auto in = gguf::GgufFile::open(model);
  ASSERT_TRUE(in) << in.error();
  ASSERT_TRUE(write_imatrix(spread_imatrix(**in, 7), dir.file("im.gguf")));
  Options o;
  o.input = model;
  o.output = dir.file("out.gguf");
  o.target = *parse_target("q4_0");
  o.awq.enabled = true;
  o.threads = 2;
  auto no_imatrix = quantize_model(o);
  ASSERT_FALSE(no_imatrix);
  EXPECT_NE(no_imatrix.error().find("--awq needs --imatrix"), std::string::npos) << no_imatrix.error();

  o.imatrix = dir.file("im.gguf");
  o.awq.alpha = 1.5f;
  auto bad_alpha = quantize_model(o);
  ASSERT_FALSE(bad_alpha);
  EXPECT_NE(bad_alpha.error().find("[0, 1]"), std::string::npos) << bad_alpha.error();
  EXPECT_FALSE(std::filesystem::exists(o.output));

  // The same tensors under an architecture whose fold points are not known.
  gguf::GgufWriter w;
  for (const auto& [key, value] : (*in)->metadata()) w.set(key, value);
  w.set("general.architecture", gguf::Value::string("phi2"));
  for (const gguf::TensorInfo& t : (*in)->tensors())
    ASSERT_TRUE(w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)));
  ASSERT_TRUE(w.write(dir.file("phi2.gguf")));
  o.input = dir.file("phi2.gguf");
  o.awq.alpha.reset();
  for (bool dry : {false, true}) {
    o.plan_only = dry;
    auto foreign = quantize_model(o);
    ASSERT_FALSE(foreign);
    EXPECT_NE(foreign.error().find("fold points of architecture 'phi2'"), std::string::npos) << foreign.error();
  }
  EXPECT_FALSE(std::filesystem::exists(o.output));
}

}  // namespace
}  // namespace cadenza::quantize
