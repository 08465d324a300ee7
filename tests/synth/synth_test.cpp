#include "synth/synth.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "tensor/quant.h"

namespace cadenza::synth {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + ".gguf")).string();
}

// A scaled-down copy of a preset: same architecture features, small enough for a unit test.
ModelShape small(const std::string& preset) {
  ModelShape s = *find_preset(preset);
  s.n_vocab = 300;
  s.n_embd = 256;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.head_dim = s.qk_norm ? 128 : 64;
  if (s.rope_dims > s.head_dim) s.rope_dims = s.head_dim * 3 / 4;  // partial RoPE (phi-4-mini)
  s.n_ff = 512;
  if (s.n_expert > 0) s.n_ff_expert = 256;
  if (s.n_ff_shared_expert > 0) s.n_ff_shared_expert = 512;
  return s;
}

// Writes `preset` (scaled down) in `type`, reads it back and checks the architecture's tensors.
void check_preset(const char* preset, const char* type) {
  SCOPED_TRACE(std::string(preset) + " " + type);
  SynthOptions opts;
  opts.shape = small(preset);
  opts.weight_type = type;
  const std::string path = temp_path("synth");
  auto summary = write_synthetic_model(opts, path);
  ASSERT_TRUE(summary.ok()) << summary.error();
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(*(*file)->get_string("general.architecture"), opts.shape.arch);
  EXPECT_EQ((*file)->get_string_array("tokenizer.ggml.tokens")->size(), 300u);
  const auto* embd = (*file)->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{256, 300}));
  EXPECT_EQ((*file)->find_tensor("output.weight") == nullptr, opts.shape.tied_output);
  EXPECT_EQ((*file)->find_tensor("blk.0.attn_q.bias") != nullptr, opts.shape.qkv_bias);
  EXPECT_EQ((*file)->find_tensor("blk.1.attn_k_norm.weight") != nullptr, opts.shape.qk_norm);
  EXPECT_EQ((*file)->find_tensor("blk.1.ffn_up_exps.weight") != nullptr, opts.shape.n_expert > 0);
  EXPECT_EQ((*file)->find_tensor("blk.1.ffn_down_shexp.weight") != nullptr,
            opts.shape.n_ff_shared_expert > 0 || opts.shape.n_expert_shared > 0);
  const bool mla = opts.shape.mla_kv_rank > 0;
  EXPECT_EQ((*file)->find_tensor("blk.0.attn_kv_a_mqa.weight") != nullptr, mla);
  EXPECT_EQ((*file)->find_tensor("blk.0.attn_q_a.weight") != nullptr, opts.shape.mla_q_rank > 0);
  if (mla) {
    const auto* k_b = (*file)->find_tensor("blk.1.attn_k_b.weight");
    ASSERT_NE(k_b, nullptr);
    EXPECT_EQ(k_b->shape, (std::vector<int64_t>{opts.shape.mla_nope, opts.shape.mla_kv_rank,
                                                opts.shape.n_head}));
    EXPECT_EQ((*file)->find_tensor("blk.1.exp_probs_b.bias") != nullptr, opts.shape.expert_sigmoid);
    EXPECT_EQ((*file)->find_tensor("blk.0.ffn_gate.weight") != nullptr, opts.shape.n_leading_dense > 0);
    EXPECT_EQ(*(*file)->get_uint("deepseek2.attention.head_count_kv"), 1u);
  }
  EXPECT_EQ(summary->file_bytes, std::filesystem::file_size(path));
  std::filesystem::remove(path);
}

TEST(Synth, EveryPresetWritesAValidFile) {
  for (const char* preset : {"qwen2.5-0.5b", "qwen3-0.6b", "llama-3.2-1b", "tinyllama-1.1b",
                             "llama-2-7b", "mixtral-small", "qwen3moe-small", "qwen2moe-small",
                             "deepseek-v3-small", "deepseek-v3-mid", "deepseek-v2-lite-small",
                             "glm4.5-small", "glm4.5-mid", "gpt-oss-small", "gpt-oss-mid", "gemma3-small",
                             "gemma-3-1b", "phi3-small", "phi-4-mini", "mistral3-small",
                             "ministral-3-3b", "granite-small", "granite-3-2b", "granitehybrid-small",
                             "granitehybrid-moe-small", "granite-4.0-h-micro", "demo"})
    for (const char* type : {"f16", "q4_k_m", "mxfp4"}) check_preset(preset, type);
}

// glm4moe: the decoder layers, then the multi-token-prediction layer (a full MoE layer plus its
// nextn.* tensors), counted in block_count; partial RoPE; the FFN norm as post_attention_norm.
TEST(Synth, Glm45PresetsWriteTheGlm4MoeLayout) {
  for (const char* preset : {"glm4.5-small", "glm4.5-mid"}) {
    SCOPED_TRACE(preset);
    SynthOptions opts;
    opts.shape = *find_preset(preset);
    opts.shape.n_vocab = 300;
    opts.shape.n_layer = 3;  // mid too, to keep the test small
    opts.shape.n_embd = 256;
    opts.shape.n_ff = 512;
    opts.shape.n_expert = 16;
    opts.shape.n_ff_expert = 256;
    opts.weight_type = "q4_k_m";
    const std::string path = temp_path("synth-glm");
    ASSERT_TRUE(write_synthetic_model(opts, path).ok());
    auto file = gguf::GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error();
    const gguf::GgufFile& f = **file;
    EXPECT_EQ(*f.get_string("general.architecture"), "glm4moe");
    EXPECT_EQ(*f.get_uint("glm4moe.block_count"), 4u);
    EXPECT_EQ(*f.get_uint("glm4moe.nextn_predict_layers"), 1u);
    EXPECT_EQ(*f.get_uint("glm4moe.leading_dense_block_count"), 1u);
    EXPECT_EQ(*f.get_uint("glm4moe.expert_shared_count"), 1u);
    EXPECT_EQ(*f.get_uint("glm4moe.expert_gating_func"), 2u);
    EXPECT_EQ(*f.get_uint("glm4moe.attention.key_length"), 128u);
    EXPECT_EQ(*f.get_uint("glm4moe.rope.dimension_count"), 64u);
    EXPECT_NE(f.find_tensor("blk.0.ffn_up.weight"), nullptr);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_up_exps.weight"), nullptr);
    EXPECT_NE(f.find_tensor("blk.1.post_attention_norm.weight"), nullptr);
    EXPECT_EQ(f.find_tensor("blk.1.ffn_norm.weight"), nullptr);
    EXPECT_NE(f.find_tensor("blk.2.exp_probs_b.bias"), nullptr);
    EXPECT_EQ(f.find_tensor("blk.2.ffn_gate_shexp.weight")->shape,
              (std::vector<int64_t>{256, 256}));
    EXPECT_EQ(f.find_tensor("blk.2.nextn.eh_proj.weight"), nullptr);
    EXPECT_NE(f.find_tensor("blk.3.ffn_down_exps.weight"), nullptr);
    EXPECT_EQ(f.find_tensor("blk.3.nextn.eh_proj.weight")->shape,
              (std::vector<int64_t>{512, 256}));
    EXPECT_EQ(f.find_tensor("blk.4.attn_norm.weight"), nullptr);
    std::filesystem::remove(path);
  }
}

TEST(Synth, EveryWeightTypeWritesAValidFile) {
  for (const char* type : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k",
                           "q5_k", "q6_k", "q4_k_m"})
    check_preset("tinyllama-1.1b", type);
}

TEST(Synth, WeightsAreRandomWithTheExpectedScale) {
  SynthOptions opts;
  opts.shape = small("tinyllama-1.1b");
  opts.weight_type = "f32";
  const std::string path = temp_path("synth-scale");
  ASSERT_TRUE(write_synthetic_model(opts, path).ok());
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  const auto* q = (*file)->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  const float* w = reinterpret_cast<const float*>(q->data);
  const int64_t n = q->num_elements();
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += w[i];
    sq += double(w[i]) * w[i];
  }
  const double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var * 256, 1.0, 0.05);  // N(0, 1/fan_in), fan_in = 256
  const auto* norm = (*file)->find_tensor("blk.0.attn_norm.weight");
  EXPECT_EQ(reinterpret_cast<const float*>(norm->data)[7], 1.0f);
  std::filesystem::remove(path);
}

TEST(Synth, SameSeedSameFileWhateverTheThreadCount) {
  SynthOptions opts;
  opts.shape = small("qwen2.5-0.5b");
  opts.weight_type = "q4_k_m";
  const std::string a = temp_path("synth-a"), b = temp_path("synth-b");
  opts.threads = 1;
  ASSERT_TRUE(write_synthetic_model(opts, a).ok());
  opts.threads = 3;
  ASSERT_TRUE(write_synthetic_model(opts, b).ok());
  auto fa = gguf::GgufFile::open(a), fb = gguf::GgufFile::open(b);
  ASSERT_TRUE(fa.ok() && fb.ok());
  ASSERT_EQ((*fa)->tensors().size(), (*fb)->tensors().size());
  for (size_t i = 0; i < (*fa)->tensors().size(); ++i) {
    const auto& ta = (*fa)->tensors()[i];
    const auto& tb = (*fb)->tensors()[i];
    ASSERT_EQ(ta.nbytes, tb.nbytes);
    EXPECT_EQ(std::memcmp(ta.data, tb.data, ta.nbytes), 0) << ta.name;
  }
  std::filesystem::remove(a);
  std::filesystem::remove(b);
}

TEST(Synth, Q4KMMixtureFollowsTheReferenceQuantizer) {
  SynthOptions opts;
  opts.shape = small("tinyllama-1.1b");
  opts.shape.n_layer = 8;
  opts.weight_type = "q4_k_m";
  const std::string path = temp_path("synth-mix");
  ASSERT_TRUE(write_synthetic_model(opts, path).ok());
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  auto type_of = [&](const std::string& name) { return (*file)->find_tensor(name)->type; };
  EXPECT_EQ(type_of("output.weight"), DType::Q6_K);
  EXPECT_EQ(type_of("blk.0.attn_q.weight"), DType::Q4_K);
  // More bits for the first and last eighth of the layers and every third in between.
  EXPECT_EQ(type_of("blk.0.attn_v.weight"), DType::Q6_K);
  EXPECT_EQ(type_of("blk.0.ffn_down.weight"), DType::Q6_K);
  EXPECT_EQ(type_of("blk.1.ffn_down.weight"), DType::Q4_K);
  EXPECT_EQ(type_of("blk.3.ffn_down.weight"), DType::Q6_K);
  EXPECT_EQ(type_of("blk.7.attn_v.weight"), DType::Q6_K);
  std::filesystem::remove(path);
}

TEST(Synth, KQuantRowsThatDoNotFitFallBack) {
  SynthOptions opts;
  opts.shape = small("qwen2.5-0.5b");
  opts.shape.n_embd = 896;  // 3.5 blocks of 256, as in the real Qwen2.5-0.5B
  opts.shape.n_head = 14;
  opts.shape.head_dim = 64;
  opts.shape.n_ff = 4864;
  opts.weight_type = "q4_k";
  const std::string path = temp_path("synth-fallback");
  ASSERT_TRUE(write_synthetic_model(opts, path).ok());
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ((*file)->find_tensor("blk.0.attn_q.weight")->type, DType::Q5_0);
  EXPECT_EQ((*file)->find_tensor("blk.0.ffn_down.weight")->type, DType::Q4_K);  // 4864 = 19 x 256
  EXPECT_EQ((*file)->find_tensor("token_embd.weight")->type, DType::Q8_0);      // tied: Q6_K -> Q8_0
  std::filesystem::remove(path);
}

// gpt-oss as the released files store it: MXFP4 experts, Q8_0 elsewhere, f32 biases and sinks,
// the sliding window and YaRN keys, the reference's file type MOSTLY_MXFP4_MOE (38).
TEST(Synth, GptOssWithMxfp4Experts) {
  SynthOptions opts;
  opts.shape = small("gpt-oss-small");
  opts.weight_type = "mxfp4_moe";
  const std::string path = temp_path("synth-gpt-oss");
  ASSERT_TRUE(write_synthetic_model(opts, path).ok());
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error();
  auto tensor = [&](const std::string& name) { return (*file)->find_tensor(name); };
  for (const char* name : {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight",
                           "blk.1.ffn_down_exps.weight"}) {
    ASSERT_NE(tensor(name), nullptr) << name;
    EXPECT_EQ(tensor(name)->type, DType::MXFP4) << name;
  }
  EXPECT_EQ(tensor("blk.0.ffn_down_exps.weight")->shape, (std::vector<int64_t>{256, 256, 16}));
  EXPECT_EQ(tensor("blk.0.attn_q.weight")->type, DType::Q8_0);
  EXPECT_EQ(tensor("token_embd.weight")->type, DType::Q8_0);
  EXPECT_EQ(tensor("output.weight")->type, DType::Q8_0);
  EXPECT_EQ(tensor("blk.0.attn_sinks.weight")->shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(tensor("blk.0.attn_sinks.weight")->type, DType::F32);
  EXPECT_EQ(tensor("blk.1.ffn_gate_exps.bias")->shape, (std::vector<int64_t>{256, 16}));
  EXPECT_EQ(tensor("blk.1.ffn_down_exps.bias")->shape, (std::vector<int64_t>{256, 16}));
  EXPECT_EQ(tensor("blk.1.ffn_gate_inp.bias")->shape, (std::vector<int64_t>{16}));
  EXPECT_NE(tensor("blk.1.post_attention_norm.weight"), nullptr);
  EXPECT_NE(tensor("blk.0.attn_output.bias"), nullptr);
  EXPECT_EQ(tensor("blk.0.ffn_norm.weight"), nullptr);
  EXPECT_EQ(*(*file)->get_uint("gpt-oss.attention.sliding_window"), 128u);
  EXPECT_EQ(*(*file)->get_string("gpt-oss.rope.scaling.type"), "yarn");
  EXPECT_EQ(*(*file)->get_uint("gpt-oss.rope.scaling.original_context_length"), 4096u);
  EXPECT_EQ(*(*file)->get_uint("general.file_type"), 38u);
  std::filesystem::remove(path);
}

TEST(Synth, BadOptionsAreErrors) {
  SynthOptions opts;
  opts.shape = small("demo");
  opts.weight_type = "q3_xyz";
  auto r = write_synthetic_model(opts, temp_path("synth-bad"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("unknown weight type"), std::string::npos);
  opts.weight_type = "f16";
  opts.vocab_from = "/nonexistent.gguf";
  r = write_synthetic_model(opts, temp_path("synth-bad"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("/nonexistent.gguf"), std::string::npos);
  opts.vocab_from.clear();
  opts.shape.n_head_kv = 3;
  EXPECT_FALSE(write_synthetic_model(opts, temp_path("synth-bad")).ok());
}

}  // namespace
}  // namespace cadenza::synth
