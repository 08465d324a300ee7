// glm4moe (GLM-4.5 / 4.6): the `cadenza synth` presets load with the configuration their metadata
// gives (the multi-token-prediction layer skipped, partial NeoX RoPE, biases and Q/K norms from
// the tensor table, sigmoid routing with its scale, the shared expert's width) and run; a file
// with a missing or misshapen tensor or a bad key is an error naming it. The logits against the
// reference engine: family_golden_test.cpp (tests/model/golden/glm4moe-small.json).
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
#include "synthetic_model.h"
#include "temp_dir.h"

namespace cadenza::model {
namespace {

// Edits of a synthesized file, made in memory.
struct Edits {
  std::set<std::string> omit = {};                          // tensors left out
  std::map<std::string, std::vector<int64_t>> reshape = {}; // tensors written as F32 of this shape
  std::vector<std::pair<std::string, gguf::Value>> extra = {};  // metadata added or replaced
};

// The preset (3 decoder layers and one multi-token-prediction layer for glm4.5-small), with a
// small built-in vocabulary, written and read back with `edits` applied.
std::shared_ptr<const gguf::GgufFile> glm_file(const std::string& preset, const Edits& edits = {},
                                               int64_t layers = 0) {
  test::TempDir dir("glm4moe");
  synth::SynthOptions options;
  options.shape = *synth::find_preset(preset);
  options.shape.n_vocab = 300;
  if (layers > 0) options.shape.n_layer = layers;
  options.weight_type = "f16";
  const std::string path = dir.file("model.gguf");
  Result<synth::SynthSummary> written = synth::write_synthetic_model(options, path);
  EXPECT_TRUE(written) << written.error();
  if (!written) return nullptr;
  Result<std::unique_ptr<gguf::GgufFile>> src = gguf::GgufFile::open(path);
  EXPECT_TRUE(src) << src.error();
  if (!src) return nullptr;
  gguf::GgufWriter w;
  for (const auto& [key, value] : (*src)->metadata()) w.set(key, value);
  for (const auto& [key, value] : edits.extra) w.set(key, value);
  for (const gguf::TensorInfo& t : (*src)->tensors()) {
    if (edits.omit.count(t.name)) continue;
    Status added;
    if (auto it = edits.reshape.find(t.name); it != edits.reshape.end()) {
      int64_t n = 1;
      for (int64_t d : it->second) n *= d;
      added = w.add_tensor(t.name, DType::F32, it->second,
                           std::vector<uint8_t>(static_cast<size_t>(n) * sizeof(float)));
    } else {
      added = w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes));
    }
    EXPECT_TRUE(added) << added.error();
  }
  return test::parse_synthetic(w.to_bytes(), preset + ".gguf");
}

std::string load_error(const Edits& edits) {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 1});
  std::shared_ptr<const gguf::GgufFile> file = glm_file("glm4.5-small", edits);
  if (!file) return "file did not parse";
  Result<std::unique_ptr<Model>> model = Model::load(file, *backend);
  return model ? "" : model.error();
}

TEST(Glm4Moe, PresetsLoadWithTheirConfigurationAndRun) {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  // glm4.5-mid at 2 decoder layers: its widths, not its depth.
  for (auto [preset, layers] : {std::pair{"glm4.5-small", 0}, std::pair{"glm4.5-mid", 2}}) {
    SCOPED_TRACE(preset);
    std::shared_ptr<const gguf::GgufFile> file = glm_file(preset, {}, layers);
    ASSERT_NE(file, nullptr);
    Result<std::unique_ptr<Model>> model = Model::load(file, *backend);
    ASSERT_TRUE(model) << model.error();
    const synth::ModelShape shape = *synth::find_preset(preset);
    const ModelConfig& c = (*model)->config();
    EXPECT_EQ(c.architecture, "glm4moe");
    EXPECT_EQ(c.n_layers, layers > 0 ? layers : shape.n_layer);  // the nextn layer is not run
    EXPECT_EQ(c.head_dim_k, 128);
    EXPECT_EQ(c.rope_dims, 64);  // partial_rotary_factor 0.5
    EXPECT_EQ(c.rope_layout, kernels::RopeLayout::NeoX);
    EXPECT_TRUE(c.qkv_bias);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_EQ(c.n_leading_dense, 1);
    EXPECT_EQ(c.n_experts, shape.n_expert);
    EXPECT_EQ(c.n_experts_used, shape.n_expert_used);
    EXPECT_EQ(c.n_ff_expert, shape.n_ff_expert);
    EXPECT_EQ(c.n_ff_shared_expert, shape.n_ff_expert);  // one shared expert
    EXPECT_EQ(c.moe_gating, kernels::ExpertGating::Sigmoid);
    EXPECT_TRUE(c.moe_normalize_top_k);
    EXPECT_FLOAT_EQ(c.moe_weights_scale, 2.5f);
    EXPECT_EQ(c.moe_groups, 1);

    Result<std::unique_ptr<Session>> session = Session::create(**model, {.max_tokens = 16});
    ASSERT_TRUE(session) << session.error();
    const std::vector<int32_t> tokens = {1, 17, 42, 99, 255, 3};
    Result<std::vector<float>> logits = (*session)->eval_all(tokens);
    ASSERT_TRUE(logits) << logits.error();
    ASSERT_EQ(logits->size(), tokens.size() * 300);
    double sum = 0;
    for (float v : *logits) {
      ASSERT_TRUE(std::isfinite(v));
      sum += std::abs(v);
    }
    EXPECT_GT(sum, 0);
  }
}

TEST(Glm4Moe, LoadErrorsNameTheTensorOrKey) {
  auto expect_error = [](const Edits& edits, const std::string& needle) {
    const std::string error = load_error(edits);
    EXPECT_NE(error.find(needle), std::string::npos)
        << "error: '" << error << "', expected '" << needle << "'";
  };
  expect_error({.omit = {"blk.1.ffn_gate_exps.weight"}}, "blk.1.ffn_gate_exps.weight");
  expect_error({.omit = {"blk.0.ffn_down.weight"}}, "blk.0.ffn_down.weight");  // the dense layer
  expect_error({.omit = {"blk.2.post_attention_norm.weight"}}, "blk.2.post_attention_norm.weight");
  // Layer 0 has biases and Q/K norms, so every layer must.
  expect_error({.omit = {"blk.2.attn_v.bias"}}, "blk.2.attn_v.bias");
  expect_error({.omit = {"blk.1.attn_k_norm.weight"}}, "blk.1.attn_k_norm.weight");
  // The shared expert is expert_shared_count (1) x expert_feed_forward_length (128) wide.
  expect_error({.reshape = {{"blk.2.ffn_up_shexp.weight", {256, 256}}}},
               "'blk.2.ffn_up_shexp.weight' has shape [256, 256], expected [256, 128]");
  expect_error({.extra = {{"glm4moe.expert_shared_count", gguf::Value::u32(2)}}},
               "'blk.1.ffn_gate_shexp.weight' has shape [256, 128], expected [256, 256]");
  expect_error({.extra = {{"glm4moe.expert_group_count", gguf::Value::u32(3)}}},
               "'glm4moe.expert_group_count' = 3 does not divide the 16 experts");
  expect_error({.extra = {{"glm4moe.nextn_predict_layers", gguf::Value::u32(4)}}},
               "glm4moe.nextn_predict_layers");
  expect_error({.extra = {{"glm4moe.leading_dense_block_count", gguf::Value::u32(4)}}},
               "glm4moe.leading_dense_block_count");
  expect_error({.extra = {{"glm4moe.expert_count", gguf::Value::u32(0)}}},
               "glm4moe.expert_count");
  // More decoder layers than the file has (block_count 6 less one nextn layer: blk.4 is missing).
  expect_error({.extra = {{"glm4moe.block_count", gguf::Value::u32(6)}}}, "blk.4.");
}

}  // namespace
}  // namespace cadenza::model
