// gpt-oss: the configuration read from a `cadenza synth` gpt-oss-small file (sinks, which layers
// have the sliding window, the gating rule, the expert biases and clamped SwiGLU, YaRN), that it
// runs (F16 and MXFP4 experts), and load errors that name what is missing. The logits against
// the reference are family_golden_test.cpp's (golden/gpt-oss-small*.json).
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"
#include "synth/synth.h"
#include "temp_dir.h"

namespace cadenza::model {
namespace {

// gpt-oss-small with a small vocabulary.
std::string write_small(const test::TempDir& dir, const std::string& type,
                        const std::string& name = "gpt-oss.gguf") {
  synth::SynthOptions options;
  options.shape = *synth::find_preset("gpt-oss-small");
  options.shape.n_vocab = 300;
  options.weight_type = type;
  const std::string path = dir.file(name);
  Result<synth::SynthSummary> written = synth::write_synthetic_model(options, path);
  EXPECT_TRUE(written) << written.error();
  return path;
}

// A copy of `src` without the tensors in `drop_tensors` and the keys in `drop_keys`.
std::string copy_without(const std::string& src, const std::string& dst,
                         const std::set<std::string>& drop_tensors,
                         const std::set<std::string>& drop_keys = {}) {
  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::open(src);
  EXPECT_TRUE(file) << file.error();
  gguf::GgufWriter w;
  for (const auto& [key, value] : (*file)->metadata()) {
    if (!drop_keys.contains(key)) w.set(key, value);
  }
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    if (drop_tensors.contains(t.name)) continue;
    const std::span<const uint8_t> bytes = t.bytes();
    EXPECT_TRUE(w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(bytes.begin(), bytes.end())));
  }
  EXPECT_TRUE(w.write(dst));
  return dst;
}

TEST(GptOss, ConfigurationFromTheFile) {
  test::TempDir dir("gpt-oss");
  const std::string path = write_small(dir, "f16");
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  Result<std::unique_ptr<Model>> model = Model::open(path, *backend);
  ASSERT_TRUE(model) << model.error();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.architecture, "gpt-oss");
  EXPECT_EQ(c.rope_layout, kernels::RopeLayout::NeoX);
  EXPECT_TRUE(c.qkv_bias && c.output_bias && c.attn_sinks);
  EXPECT_EQ(c.attn_window, 128);
  // The HF layer_types pattern: sliding, full, sliding, full.
  EXPECT_EQ(c.attention_window(0), 128);
  EXPECT_EQ(c.attention_window(1), 0);
  EXPECT_EQ(c.attention_window(2), 128);
  EXPECT_EQ(c.attention_window(3), 0);
  EXPECT_EQ(c.moe_gating, kernels::ExpertGating::SoftmaxTopK);
  EXPECT_FALSE(c.moe_normalize_top_k);
  EXPECT_TRUE(c.moe_expert_bias);
  EXPECT_FLOAT_EQ(c.moe_swiglu_alpha, 1.702f);
  EXPECT_FLOAT_EQ(c.moe_swiglu_limit, 7.0f);
  EXPECT_EQ(c.rope_scaling, RopeScaling::Yarn);
  EXPECT_EQ(c.yarn_orig_ctx, 4096);
  EXPECT_FLOAT_EQ(1.0f / c.rope_freq_scale, 32.0f);
  EXPECT_EQ(c.n_experts, 16);
  EXPECT_EQ(c.n_experts_used, 4);
  EXPECT_EQ(c.head_dim_k, 64);
  EXPECT_NE(c.summary().find("attention sinks, window 128 on 2 of 4 layers"), std::string::npos)
      << c.summary();
}

// A pattern key of period 3: layers 0, 1 windowed, 2 full, 3 windowed.
TEST(GptOss, SlidingWindowPatternKey) {
  test::TempDir dir("gpt-oss");
  const std::string src = write_small(dir, "f16");
  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::open(src);
  ASSERT_TRUE(file) << file.error();
  gguf::GgufWriter w;
  for (const auto& [key, value] : (*file)->metadata()) w.set(key, value);
  w.set("gpt-oss.attention.sliding_window_pattern", gguf::Value::u32(3));
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    const std::span<const uint8_t> bytes = t.bytes();
    ASSERT_TRUE(w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(bytes.begin(), bytes.end())));
  }
  const std::string path = dir.file("pattern.gguf");
  ASSERT_TRUE(w.write(path));
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  Result<std::unique_ptr<Model>> model = Model::open(path, *backend);
  ASSERT_TRUE(model) << model.error();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.attention_window(0), 128);
  EXPECT_EQ(c.attention_window(1), 128);
  EXPECT_EQ(c.attention_window(2), 0);
  EXPECT_EQ(c.attention_window(3), 128);
}

// F16 and MXFP4 experts: finite logits past the window (positions 0..139), different from each
// other (the experts' 4-bit rounding; it also flips routing near-ties, so no tight bound), and the
// same whether evaluated at once or token by token.
TEST(GptOss, RunsWithF16AndMxfp4Experts) {
  test::TempDir dir("gpt-oss");
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  std::vector<int32_t> tokens(140);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 11) % 300);
  std::vector<std::vector<float>> last;
  for (const char* type : {"f16", "mxfp4_moe"}) {
    SCOPED_TRACE(type);
    const std::string path = write_small(dir, type, std::string(type) + ".gguf");
    Result<std::unique_ptr<Model>> model = Model::open(path, *backend);
    ASSERT_TRUE(model) << model.error();
    SessionOptions options;
    options.max_tokens = 160;
    Result<std::unique_ptr<Session>> all = Session::create(**model, options);
    ASSERT_TRUE(all) << all.error();
    Result<std::vector<float>> logits = (*all)->eval(tokens);
    ASSERT_TRUE(logits) << logits.error();
    for (float x : *logits) ASSERT_TRUE(std::isfinite(x));
    options.max_batch_tokens = 1;
    Result<std::unique_ptr<Session>> one = Session::create(**model, options);
    ASSERT_TRUE(one) << one.error();
    std::vector<float> stepped;
    for (int32_t t : tokens) {
      Result<std::vector<float>> step = (*one)->eval({&t, 1});
      ASSERT_TRUE(step) << step.error();
      stepped = std::move(*step);
    }
    EXPECT_EQ(stepped, *logits);
    last.push_back(*logits);
  }
  double max_diff = 0;
  for (size_t i = 0; i < last[0].size(); ++i) {
    max_diff = std::max(max_diff, double(std::abs(last[0][i] - last[1][i])));
  }
  EXPECT_GT(max_diff, 0.0);
}

TEST(GptOss, MissingTensorsAndKeysAreNamed) {
  test::TempDir dir("gpt-oss");
  const std::string src = write_small(dir, "f16");
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  struct Case { std::set<std::string> tensors, keys; std::string expected; };
  const Case cases[] = {
      {{"blk.2.attn_sinks.weight"}, {}, "blk.2.attn_sinks.weight"},
      {{"blk.1.ffn_down_exps.bias"}, {}, "blk.1.ffn_down_exps.bias"},
      {{"blk.0.ffn_gate_inp.bias"}, {}, "blk.0.ffn_gate_inp.bias"},
      {{"blk.3.post_attention_norm.weight"}, {}, "blk.3.post_attention_norm.weight"},
      {{}, {"gpt-oss.attention.sliding_window"}, "gpt-oss.attention.sliding_window"},
  };
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    const std::string path = copy_without(src, dir.file("bad" + std::to_string(i++) + ".gguf"),
                                           c.tensors, c.keys);
    Result<std::unique_ptr<Model>> model = Model::open(path, *backend);
    ASSERT_FALSE(model);
    EXPECT_NE(model.error().find(c.expected), std::string::npos) << model.error();
  }
}

}  // namespace
}  // namespace cadenza::model
