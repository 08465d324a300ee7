// The dense families gemma3, phi3, mistral3 and granite, and granite's hybrid granitehybrid: the
// configuration read from their `cadenza synth` test presets (which layers are windowed and how
// they rotate, the fused projections, LongRoPE, YaRN and the attention temperature, the
// multipliers; granitehybrid's recurrent layers from the per-layer KV head counts, its Mamba-2
// shape, no RoPE, dense or MoE FFN), the final soft-cap, and load errors that name the key or
// tensor. The logits against the reference are family_golden_test.cpp's
// (golden/{gemma3,phi3,mistral3,granite,granitehybrid}-small*.json).
#include <algorithm>
#include <cmath>
#include <map>
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

// A test preset with a small vocabulary.
std::string write_small(const test::TempDir& dir, const std::string& preset) {
  synth::SynthOptions options;
  options.shape = *synth::find_preset(preset);
  options.shape.n_vocab = 300;
  options.weight_type = "f16";
  const std::string path = dir.file(preset + ".gguf");
  Result<synth::SynthSummary> written = synth::write_synthetic_model(options, path);
  EXPECT_TRUE(written) << written.error();
  return path;
}

// A copy of `src` without some tensors and keys, with some keys added or replaced.
std::string copy_with(const std::string& src, const std::string& dst,
                      const std::set<std::string>& drop_tensors,
                      const std::set<std::string>& drop_keys,
                      const std::map<std::string, gguf::Value>& set_keys = {}) {
  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::open(src);
  EXPECT_TRUE(file) << file.error();
  gguf::GgufWriter w;
  for (const auto& [key, value] : (*file)->metadata()) {
    if (!drop_keys.contains(key)) w.set(key, value);
  }
  for (const auto& [key, value] : set_keys) w.set(key, value);
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    if (drop_tensors.contains(t.name)) continue;
    const std::span<const uint8_t> bytes = t.bytes();
    EXPECT_TRUE(w.add_tensor(t.name, t.type, t.shape,
                             std::vector<uint8_t>(bytes.begin(), bytes.end())));
  }
  EXPECT_TRUE(w.write(dst));
  return dst;
}

class DenseFamilies : public ::testing::Test {
 protected:
  Result<std::unique_ptr<Model>> open(const std::string& path) {
    return Model::open(path, *backend_);
  }
  std::unique_ptr<kernels::Backend> backend_ = kernels::make_cpu_backend({.n_threads = 2});
  test::TempDir dir_{"dense-families"};
};

TEST_F(DenseFamilies, Gemma3Configuration) {
  Result<std::unique_ptr<Model>> model = open(write_small(dir_, "gemma3-small"));
  ASSERT_TRUE(model) << model.error();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.rope_layout, kernels::RopeLayout::NeoX);
  EXPECT_TRUE(c.qk_norm && c.tied_output);
  EXPECT_EQ(c.ffn_activation, ModelConfig::FfnActivation::GeluTanh);
  EXPECT_FLOAT_EQ(c.embedding_scale, 16.0f);              // sqrt(256)
  EXPECT_FLOAT_EQ(c.attention_scale(), 1.0f / 8.0f);       // 1/sqrt(head dim 64)
  for (int64_t il = 0; il < 5; ++il) EXPECT_EQ(c.attention_window(il), 16) << il;
  EXPECT_EQ(c.attention_window(5), 0);  // every 6th layer is global
  // Windowed layers: base 10000, unscaled; the global one: base 1e6, linear x8.
  EXPECT_FLOAT_EQ(c.rope_params(0).freq_base, 10000.0f);
  EXPECT_FLOAT_EQ(c.rope_params(0).freq_scale, 1.0f);
  EXPECT_FLOAT_EQ(c.rope_params(5).freq_base, 1e6f);
  EXPECT_FLOAT_EQ(c.rope_params(5).freq_scale, 1.0f / 8.0f);
  EXPECT_EQ(c.final_logit_softcap, 0.0f);
}

// final_logit_softcapping: every logit within [-cap, cap], and the same as tanh of the uncapped.
TEST_F(DenseFamilies, Gemma3FinalLogitSoftcap) {
  const std::string src = write_small(dir_, "gemma3-small");
  const std::string capped =
      copy_with(src, dir_.file("capped.gguf"), {}, {},
                {{"gemma3.final_logit_softcapping", gguf::Value::f32(2.0f)}});
  const std::vector<int32_t> tokens = {1, 20, 30, 40};
  std::vector<float> plain, soft;
  for (auto [path, out] : {std::pair{src, &plain}, std::pair{capped, &soft}}) {
    Result<std::unique_ptr<Model>> model = open(path);
    ASSERT_TRUE(model) << model.error();
    Result<std::unique_ptr<Session>> session = Session::create(**model);
    ASSERT_TRUE(session) << session.error();
    Result<std::vector<float>> logits = (*session)->eval(tokens);
    ASSERT_TRUE(logits) << logits.error();
    *out = *logits;
  }
  ASSERT_EQ(plain.size(), soft.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_LE(std::abs(soft[i]), 2.0f);
    EXPECT_NEAR(soft[i], 2.0 * std::tanh(plain[i] / 2.0), 1e-5) << i;
  }
}

TEST_F(DenseFamilies, Phi3Configuration) {
  Result<std::unique_ptr<Model>> model = open(write_small(dir_, "phi3-small"));
  ASSERT_TRUE(model) << model.error();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.rope_layout, kernels::RopeLayout::NeoX);
  EXPECT_TRUE(c.fused_qkv && c.fused_gate_up);
  EXPECT_EQ(c.rope_dims, 48);
  EXPECT_EQ(c.rope_freqs_tensor, "rope_factors_short.weight");
  EXPECT_TRUE(c.has_rope_freqs_tensor);
  EXPECT_NEAR(c.rope_attn_factor, 1.19024, 1e-4);
  EXPECT_EQ(c.context_length, 4096);  // capped at the original context (short factors)
  EXPECT_EQ(c.attention_window(0), 0);
}

// Without LongRoPE tensors (Phi-3-mini-4k): no divisors, the whole context; a window key shorter
// than the context windows every layer.
TEST_F(DenseFamilies, Phi3WithoutLongRopeAndWithAWindow) {
  const std::string src = write_small(dir_, "phi3-small");
  const std::string path = copy_with(
      src, dir_.file("plain.gguf"), {"rope_factors_short.weight", "rope_factors_long.weight"},
      {"phi3.rope.scaling.attn_factor"},
      {{"phi3.attention.sliding_window", gguf::Value::u32(2047)}});
  Result<std::unique_ptr<Model>> model = open(path);
  ASSERT_TRUE(model) << model.error();
  const ModelConfig& c = (*model)->config();
  EXPECT_FALSE(c.has_rope_freqs_tensor);
  EXPECT_EQ(c.rope_attn_factor, 1.0f);
  EXPECT_EQ(c.context_length, 131072);
  EXPECT_EQ(c.attention_window(0), 2047);
  EXPECT_EQ(c.attention_window(2), 2047);
}

TEST_F(DenseFamilies, Mistral3Configuration) {
  Result<std::unique_ptr<Model>> model = open(write_small(dir_, "mistral3-small"));
  ASSERT_TRUE(model) << model.error();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.rope_layout, kernels::RopeLayout::Normal);
  EXPECT_EQ(c.rope_scaling, RopeScaling::Yarn);
  EXPECT_FLOAT_EQ(1.0f / c.rope_freq_scale, 16.0f);
  EXPECT_FLOAT_EQ(c.rope_params().attn_factor, 1.0f);  // mscale == mscale_all_dim
  EXPECT_FLOAT_EQ(c.attn_temperature_beta, 0.1f);
  EXPECT_EQ(c.attn_temperature_length, 64);
}

TEST_F(DenseFamilies, GraniteConfiguration) {
  Result<std::unique_ptr<Model>> model = open(write_small(dir_, "granite-small"));
  ASSERT_TRUE(model) << model.error();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.rope_layout, kernels::RopeLayout::Normal);
  EXPECT_FLOAT_EQ(c.embedding_scale, 12.0f);
  EXPECT_FLOAT_EQ(c.residual_scale, 0.22f);
  EXPECT_FLOAT_EQ(c.attention_scale(), 0.015625f);
  EXPECT_FLOAT_EQ(c.logit_scale, 1.0f / 8.0f);
}

TEST_F(DenseFamilies, GraniteHybridConfiguration) {
  Result<std::unique_ptr<Model>> model = open(write_small(dir_, "granitehybrid-small"));
  ASSERT_TRUE(model) << model.error();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.recurrent_layers, (std::vector<bool>{true, true, false, true, true, false}));
  EXPECT_EQ(c.layer_kv_heads, (std::vector<int64_t>{0, 0, 2, 0, 0, 2}));
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.recurrent.conv_kernel, 4);
  EXPECT_EQ(c.recurrent.k_heads, 2);   // groups
  EXPECT_EQ(c.recurrent.k_dim, 16);    // state size
  EXPECT_EQ(c.recurrent.v_heads, 8);   // heads
  EXPECT_EQ(c.recurrent.v_dim, 32);    // head dim
  EXPECT_EQ(c.recurrent.conv_channels(), 256 + 2 * 2 * 16);
  for (int64_t il = 0; il < c.n_layers; ++il) EXPECT_FALSE(c.uses_rope(il)) << il;
  EXPECT_FLOAT_EQ(c.embedding_scale, 2.0f);
  EXPECT_FLOAT_EQ(c.residual_scale, 0.5f);
  EXPECT_FLOAT_EQ(c.attention_scale(), 0.0625f);
  EXPECT_FLOAT_EQ(c.logit_scale, 0.5f);
  EXPECT_EQ(c.n_experts, 0);
  EXPECT_TRUE(c.dense_ffn_layer(5));

  // rope.scaling.finetuned true (or missing): RoPE on every attention layer.
  const std::string roped = copy_with(write_small(dir_, "granitehybrid-small"),
                                      dir_.file("roped.gguf"), {},
                                      {"granitehybrid.rope.scaling.finetuned"});
  model = open(roped);
  ASSERT_TRUE(model) << model.error();
  EXPECT_TRUE((*model)->config().uses_rope(2));

  model = open(write_small(dir_, "granitehybrid-moe-small"));
  ASSERT_TRUE(model) << model.error();
  EXPECT_EQ((*model)->config().n_experts, 16);
  EXPECT_EQ((*model)->config().n_experts_used, 4);
  EXPECT_EQ((*model)->config().n_ff_expert, 64);
  EXPECT_EQ((*model)->config().n_ff_shared_expert, 128);
  EXPECT_FALSE((*model)->config().dense_ffn_layer(0));
}

TEST_F(DenseFamilies, MissingTensorsAndUnsupportedKeysAreNamed) {
  struct Case {
    std::string preset;
    std::set<std::string> tensors, keys;
    std::map<std::string, gguf::Value> set;
    std::string expected;
  };
  const Case cases[] = {
      {"gemma3-small", {"blk.3.post_ffw_norm.weight"}, {}, {}, "blk.3.post_ffw_norm.weight"},
      {"gemma3-small", {}, {"gemma3.attention.sliding_window"}, {},
       "gemma3.attention.sliding_window"},
      {"gemma3-small", {}, {}, {{"gemma3.attn_logit_softcapping", gguf::Value::f32(50.0f)}},
       "gemma3.attn_logit_softcapping"},
      {"phi3-small", {"blk.1.attn_qkv.weight"}, {}, {}, "blk.1.attn_"},
      {"phi3-small", {"rope_factors_short.weight"}, {}, {}, "rope_factors_long.weight"},
      {"phi3-small", {}, {"phi3.rope.scaling.original_context_length"}, {},
       "phi3.rope.scaling.original_context_length"},
      {"mistral3-small", {}, {"mistral3.rope.scaling.original_context_length"}, {},
       "mistral3.rope.scaling.original_context_length"},
      {"granite-small", {}, {}, {{"granite.logit_scale", gguf::Value::f32(0.0f)}},
       "granite.logit_scale"},
      {"granitehybrid-small", {"blk.3.ssm_conv1d.bias"}, {}, {}, "blk.3.ssm_conv1d.bias"},
      {"granitehybrid-small", {"blk.0.ssm_d"}, {}, {}, "blk.0.ssm_d"},
      {"granitehybrid-small", {}, {"granitehybrid.ssm.group_count"}, {},
       "granitehybrid.ssm.group_count"},
      {"granitehybrid-small", {}, {}, {{"granitehybrid.ssm.time_step_rank", gguf::Value::u32(3)}},
       "granitehybrid.ssm.inner_size"},
      // One KV head count for every layer: which layers are Mamba-2 is unknown.
      {"granitehybrid-small", {}, {}, {{"granitehybrid.attention.head_count_kv", gguf::Value::u32(2)}},
       "must give the KV head count per layer"},
      {"granitehybrid-small", {}, {},
       {{"granitehybrid.attention.head_count_kv", gguf::Value::i32_array({0, 0, 2})}},
       "3 entries, expected one per layer (6)"},
      {"granitehybrid-small", {}, {},
       {{"granitehybrid.attention.head_count_kv", gguf::Value::i32_array({0, 0, 0, 0, 0, 0})}},
       "is 0 on every layer"},
      {"granitehybrid-small", {}, {},
       {{"granitehybrid.attention.head_count_kv", gguf::Value::i32_array({0, 0, 2, 0, 0, 1})}},
       "every entry must be 0 or the same KV head count"},
  };
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    const std::string src = write_small(dir_, c.preset);
    const std::string path =
        copy_with(src, dir_.file("bad" + std::to_string(i++) + ".gguf"), c.tensors, c.keys, c.set);
    Result<std::unique_ptr<Model>> model = open(path);
    ASSERT_FALSE(model);
    EXPECT_NE(model.error().find(c.expected), std::string::npos) << model.error();
  }
}

}  // namespace
}  // namespace cadenza::model
