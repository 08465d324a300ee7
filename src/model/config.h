// ModelConfig: the hyperparameters of a model, read from GGUF metadata (`<arch>.*` keys) and the
// tensor table only; nothing is hard-coded per model. from_gguf reads the keys every architecture
// has (this file) and hands the rest to the family registered for `general.architecture`
// (registry.h; its configure hook in arch/<family>.cpp sets the flags below that differ).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/shard.h"
#include "util/result.h"

namespace cadenza::gguf {
class GgufFile;
}

namespace cadenza::model {

class ArchitectureRegistry;

enum class RopeScaling { None, Linear, Llama3 };

struct ModelConfig {
  std::string architecture;  // the `general.architecture` string: selects the family (registry.h)
  std::string name;          // `general.name`, may be empty

  int64_t n_vocab = 0;         // rows of token_embd.weight
  int64_t context_length = 0;  // trained context (`<arch>.context_length`)
  int64_t n_embd = 0;
  int64_t n_layers = 0;
  int64_t n_ff = 0;            // dense FFN width (also the expert width for Mixtral-style llama)
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim_k = 0;      // `attention.key_length`, default n_embd / n_heads
  int64_t head_dim_v = 0;      // `attention.value_length`, default n_embd / n_heads
  float rms_norm_eps = 1e-5f;

  // RoPE
  int32_t rope_dims = 0;                                 // `rope.dimension_count`, default head_dim_k
  float rope_freq_base = 10000.0f;
  kernels::RopeLayout rope_layout = kernels::RopeLayout::Normal;  // set by the family
  RopeScaling rope_scaling = RopeScaling::None;
  float rope_freq_scale = 1.0f;                          // 1 / linear factor
  // Llama 3 scaling: per-pair divisors. From the `rope_freqs.weight` tensor when the file has it
  // (has_rope_freqs_tensor), else computed here from the rope.scaling.* keys; empty otherwise.
  bool has_rope_freqs_tensor = false;
  std::vector<float> rope_freq_factors;

  // Attention variants (set by the family)
  bool qkv_bias = false;  // attn_{q,k,v}.bias in every layer (qwen2*; llama: when layer 0 has them)
  bool qk_norm = false;   // attn_{q,k}_norm.weight: RMS norm per head before RoPE (qwen3*)
  bool output_bias = false;  // attn_output.bias loaded in the layers that have it (llama)

  // Mixture of experts (n_experts == 0: dense FFN); read by read_feed_forward (metadata.h) with
  // the family's defaults
  int64_t n_experts = 0;
  int64_t n_experts_used = 0;
  int64_t n_ff_expert = 0;          // expert FFN width
  bool moe_normalize_top_k = true;  // renormalise the chosen experts' weights to sum to 1
  float moe_weights_scale = 1.0f;
  // Shared expert (qwen2moe): a dense SwiGLU FFN of this width that every token runs, scaled by
  // sigmoid(h . ffn_gate_inp_shexp) and added to the routed experts' output. 0: none.
  int64_t n_ff_shared_expert = 0;

  bool tied_output = false;  // no output.weight: logits use token_embd.weight

  // Which part of the model this process holds (shard.h): the whole model unless Model::load
  // was given a distributed runtime. Not from the file.
  ModelShard shard;

  // Reads and validates the configuration (ranges, divisibility, supported features). Errors name
  // the file and the key; an architecture the registry lacks is an error listing the supported
  // ones. The first form uses the built-in families (ArchitectureRegistry::builtin()).
  static Result<ModelConfig> from_gguf(const gguf::GgufFile& file);
  static Result<ModelConfig> from_gguf(const gguf::GgufFile& file,
                                       const ArchitectureRegistry& registry);

  // One line for logs: "qwen3: 2 layers, embd 64, heads 4/2 x 32, ffn 128, vocab 151936, ...".
  std::string summary() const;
};

}  // namespace cadenza::model
