// ModelConfig: the hyperparameters of a model, read from GGUF metadata (`<arch>.*` keys) and the
// tensor table only; nothing is hard-coded per model. from_gguf reads the keys every architecture
// has (this file) and hands the rest to the family registered for `general.architecture`
// (registry.h; its configure hook in arch/<family>.cpp sets the flags below that differ).
#pragma once

#include <cmath>
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

enum class RopeScaling { None, Linear, Llama3, Yarn };

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
  // YaRN (`rope.scaling.type` yarn): rope_freq_scale = 1 / `rope.scaling.factor`, and
  // `rope.scaling.{original_context_length, yarn_ext_factor (1), yarn_beta_fast (32),
  // yarn_beta_slow (1), yarn_attn_factor (1), yarn_log_multiplier (0)}` (defaults in brackets).
  // What the attention scaling does with them is the family's (kernels::RopeParams::attn_factor,
  // the softmax scale).
  int32_t yarn_orig_ctx = 0;
  float yarn_ext_factor = 0.0f;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  float yarn_attn_factor = 1.0f;
  float yarn_log_multiplier = 0.0f;
  // With YaRN: the rotation's scale (kernels::RopeParams::attn_factor) is yarn_attn_factor *
  // (1 + 0.1 ln(factor)) (Qwen, gpt-oss) unless the family sets this: yarn_attn_factor * this.
  float yarn_rotation_scale = 0.0f;
  // Without YaRN: multiplies the rotated elements (phi3's LongRoPE `rope.scaling.attn_factor`).
  float rope_attn_factor = 1.0f;
  // The per-pair divisor tensor (Llama 3 `rope_freqs.weight`; phi3 `rope_factors_short.weight`).
  std::string rope_freqs_tensor = "rope_freqs.weight";
  // The RoPE of the windowed layers (gemma3: `rope.freq_base_swa`, and no scaling there). 0: the
  // same base as the other layers.
  float rope_freq_base_window = 0.0f;
  bool rope_window_unscaled = false;

  // Attention variants (set by the family)
  bool qkv_bias = false;  // attn_{q,k,v}.bias in every layer (qwen2*; llama: when layer 0 has them)
  bool qk_norm = false;   // attn_{q,k}_norm.weight: RMS norm per head before RoPE (qwen3*)
  bool output_bias = false;  // attn_output.bias loaded in the layers that have it (llama)
  // Attention sinks (gpt-oss): `blk.N.attn_sinks.weight` [H], one learned logit per head that
  // joins its softmax denominator (kernels::AttentionParams::sinks).
  bool attn_sinks = false;
  // Sliding-window attention (gpt-oss): the layers marked in attn_window_layers attend to the
  // last attn_window positions only (`attention.sliding_window`); empty / 0: every layer full.
  int64_t attn_window = 0;
  std::vector<bool> attn_window_layers;
  // The window of layer `layer`'s attention (0: all positions).
  int32_t attention_window(int64_t layer) const {
    return layer < static_cast<int64_t>(attn_window_layers.size()) &&
                   attn_window_layers[static_cast<size_t>(layer)]
               ? static_cast<int32_t>(attn_window)
               : 0;
  }
  // The factor of q . k in the softmax: 0 means 1/sqrt(head_dim_k) (granite: `attention.scale`).
  float attn_scale = 0.0f;
  float attention_scale() const {
    return attn_scale > 0 ? attn_scale : 1.0f / std::sqrt(static_cast<float>(head_dim_k));
  }
  // The attention temperature of Ministral 3 (`attention.temperature_scale` beta) and Llama 4:
  // the query of a token at position p is multiplied by
  // 1 + beta ln(1 + floor((p + attn_temperature_offset) / attn_temperature_length)). 0: none.
  // Llama 4 scales only its NoPE layers (attn_temperature_nope_only).
  float attn_temperature_beta = 0.0f;
  int32_t attn_temperature_length = 0;
  int32_t attn_temperature_offset = 0;
  bool attn_temperature_nope_only = false;
  // Llama 4's interleaved RoPE: the layers with (layer + 1) % nope_interval == 0 ("NoPE") use no
  // RoPE and attend to every earlier position; the others rotate, normalise q and k per head
  // without a weight (qk_unweighted_norm: x / sqrt(mean(x^2) + eps)) and attend only within their
  // chunk of attn_chunk positions (a token at p sees p - p % chunk .. p). 0: none of it.
  int64_t nope_interval = 0;
  bool qk_unweighted_norm = false;
  int64_t attn_chunk = 0;
  bool uses_rope(int64_t layer) const {
    return nope_interval <= 0 || (layer + 1) % nope_interval != 0;
  }
  // The chunk of layer `layer`'s attention (0: none).
  int32_t attention_chunk(int64_t layer) const {
    return uses_rope(layer) ? static_cast<int32_t>(attn_chunk) : 0;
  }
  bool attention_temperature(int64_t layer) const {
    return attn_temperature_beta != 0 && (!attn_temperature_nope_only || !uses_rope(layer));
  }
  // Fused projections (phi3): `attn_qkv.weight` [(H + 2 KV) dk][d], the rows of q, k, then v,
  // instead of attn_{q,k,v}; `ffn_up.weight` [2f][d], the gate's rows then the up rows, and no
  // ffn_gate. Not split across tensor-parallel ranks (a load error).
  bool fused_qkv = false;
  bool fused_gate_up = false;
  // The FFN's gate activation: SiLU (SwiGLU) or GELU with the tanh approximation (GeGLU, gemma3).
  enum class FfnActivation { Silu, GeluTanh };
  FfnActivation ffn_activation = FfnActivation::Silu;
  // Multipliers (1: none): the token embeddings (granite `embedding_scale`; gemma3 sqrt(n_embd)),
  // each block's output before it joins the residual stream (granite `residual_scale`), the
  // logits (granite: 1 / `logit_scale`); final_logit_softcap > 0: logits = cap tanh(logits / cap)
  // (`final_logit_softcapping`).
  float embedding_scale = 1.0f;
  float residual_scale = 1.0f;
  float logit_scale = 1.0f;
  float final_logit_softcap = 0.0f;
  // Multi-head latent attention (deepseek2; blocks/latent_attention.h); all 0 otherwise. The KV
  // cache then has one "head" of head_dim_k = kv_rank + rope elements whose first head_dim_v =
  // kv_rank are the value (kv_values_in_keys).
  struct LatentAttentionShape {
    int64_t q_rank = 0;   // `attention.q_lora_rank`; 0: no query latent (attn_q.weight)
    int64_t kv_rank = 0;  // `attention.kv_lora_rank`
    int64_t nope = 0;     // per-head no-RoPE query/key part: key_length_mla - rope
    int64_t rope = 0;     // per-head RoPE part, shared key: rope.dimension_count
    int64_t v = 0;        // per-head value: value_length_mla
  } mla;
  // The KV store has no values: a head's value is the first head_dim_v elements of its key row
  // (multi-head latent attention's compressed cache, kernels::KvLayer::values_in_keys).
  bool kv_values_in_keys = false;

  // Mixture of experts (n_experts == 0: dense FFN); read by read_feed_forward (metadata.h) with
  // the family's defaults
  int64_t n_experts = 0;
  int64_t n_experts_used = 0;
  int64_t n_ff_expert = 0;          // expert FFN width
  bool moe_normalize_top_k = true;  // renormalise the chosen experts' weights to sum to 1
  float moe_weights_scale = 1.0f;
  // Expert selection (deepseek2, glm4moe): sigmoid gating (`expert_gating_func` 2; 3: softmax
  // over the chosen k, gpt-oss), a per-expert
  // selection bias tensor (`exp_probs_b.bias`), groups (`expert_group_count`,
  // `expert_group_used_count`); see kernels::RoutingParams.
  kernels::ExpertGating moe_gating = kernels::ExpertGating::Softmax;
  int64_t moe_groups = 1;
  int64_t moe_groups_used = 1;
  // The first layers with a dense FFN (n_ff) before the expert layers (`leading_dense_block_count`,
  // deepseek2 / glm4moe).
  int64_t n_leading_dense = 0;
  // The FFN's pre-norm tensor of each layer (`blk.N.<this>`; arch/mixture_decoder.h):
  // "ffn_norm.weight" (llama4), "post_attention_norm.weight" (glm4moe).
  std::string ffn_norm_tensor = "ffn_norm.weight";
  // Interleaved experts (llama4 `interleave_moe_layer_step` S > 1): only the layers with
  // (layer + 1) % S == 0 have experts, the others a dense FFN (n_ff).
  int64_t moe_interleave_step = 0;
  bool dense_ffn_layer(int64_t layer) const {
    return layer < n_leading_dense || (moe_interleave_step > 1 && (layer + 1) % moe_interleave_step != 0);
  }
  // The routing weight scales the expert's input instead of its output (llama4: out =
  // FFN_e(w h), top-1). Requires n_experts_used == 1.
  bool moe_weight_input = false;
  // Shared expert (qwen2moe): a dense SwiGLU FFN of this width that every token runs, scaled by
  // sigmoid(h . ffn_gate_inp_shexp) and added to the routed experts' output. 0: none.
  int64_t n_ff_shared_expert = 0;
  // gpt-oss experts: a router bias (`ffn_gate_inp.bias` [E]) and per-expert biases
  // (`ffn_{gate,up}_exps.bias` [E][f], `ffn_down_exps.bias` [E][d]).
  bool moe_expert_bias = false;
  // gpt-oss's clamped SwiGLU in the experts (kernels::Backend::swiglu_clamped) when limit > 0.
  float moe_swiglu_alpha = 0.0f;
  float moe_swiglu_limit = 0.0f;

  bool tied_output = false;  // no output.weight: logits use token_embd.weight

  // Hybrid models (qwen35, granitehybrid): layers whose token mixer is a Gated DeltaNet
  // linear-attention block or a Mamba-2 block with a fixed-size recurrent state per sequence
  // (model::KvCache's state slots) instead of attention over a KV cache. recurrent_layers:
  // [n_layers], true for those; empty: none. Mamba-2 maps onto the same shape: k_heads = groups
  // (`ssm.group_count`), k_dim = state size, v_heads = heads (`ssm.time_step_rank`), v_dim = head
  // dim (`ssm.inner_size` / heads); conv_channels() is then its x, B, C channels and the delta
  // state [v_heads][k_dim][v_dim] its SSM state [heads][state][head dim].
  struct RecurrentShape {
    int64_t conv_kernel = 0;  // `ssm.conv_kernel`: taps of the short causal convolution
    int64_t k_heads = 0;      // `ssm.group_count`
    int64_t k_dim = 0;        // `ssm.state_size`: per key head (also q)
    int64_t v_heads = 0;      // `ssm.time_step_rank`
    int64_t v_dim = 0;        // `ssm.inner_size` / v_heads
    int64_t conv_channels() const { return 2 * k_heads * k_dim + v_heads * v_dim; }
    // Floats of one sequence's state in one layer: the convolution's last conv_kernel - 1
    // inputs, and the delta rule's [v_heads][k_dim][v_dim].
    int64_t conv_state_floats() const { return (conv_kernel - 1) * conv_channels(); }
    int64_t delta_state_floats() const { return v_heads * k_dim * v_dim; }
  } recurrent;
  std::vector<bool> recurrent_layers;
  // `attention.head_count_kv` when the file gives it per layer (an array of n_layers entries, each
  // 0 or n_kv_heads: hybrid files mark their layers without attention with 0, granitehybrid);
  // empty when it is one number. Families that do not read it ignore it.
  std::vector<int64_t> layer_kv_heads;
  bool hybrid() const { return !recurrent_layers.empty(); }
  bool is_recurrent(int64_t layer) const {
    return layer < static_cast<int64_t>(recurrent_layers.size()) &&
           recurrent_layers[static_cast<size_t>(layer)];
  }

  // Which part of the model this process holds (shard.h): the whole model unless Model::load
  // was given a distributed runtime. Not from the file.
  ModelShard shard;

  // Routed experts kept on another backend (--cpu-moe / --n-cpu-moe: the CPU beside a GPU
  // model): the experts of layers [0, layers) are uploaded to and run on `backend` (borrowed,
  // outlives the model); the hidden state crosses over and back per layer. Not from the file;
  // Model::load sets it from ModelLoadOptions::expert_offload.
  struct ExpertOffload {
    kernels::Backend* backend = nullptr;
    int64_t layers = 0;
    bool holds(int64_t layer) const { return backend != nullptr && layer < layers; }
  } expert_offload;

  // Reads and validates the configuration (ranges, divisibility, supported features). Errors name
  // the file and the key; an architecture the registry lacks is an error listing the supported
  // ones. The first form uses the built-in families (ArchitectureRegistry::builtin()).
  static Result<ModelConfig> from_gguf(const gguf::GgufFile& file);
  static Result<ModelConfig> from_gguf(const gguf::GgufFile& file,
                                       const ArchitectureRegistry& registry);

  // The RoPE of this model's attention: dims, base, layout, linear or YaRN scaling; with YaRN the
  // rotated elements are scaled by yarn_attn_factor * (1 + 0.1 ln(factor)) (the YaRN paper's
  // attention temperature, as Qwen and gpt-oss use it). freq_factors is the caller's (a tensor).
  kernels::RopeParams rope_params() const;
  // The RoPE of layer `layer`: rope_params(), or for a windowed layer with its own base
  // (rope_freq_base_window) that base, unscaled when rope_window_unscaled.
  kernels::RopeParams rope_params(int64_t layer) const;

  // One line for logs: "qwen3: 2 layers, embd 64, heads 4/2 x 32, ffn 128, vocab 151936, ...".
  std::string summary() const;
};

}  // namespace cadenza::model
