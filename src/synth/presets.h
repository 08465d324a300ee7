// Architecture presets for `cadenza synth`: the shapes of real open-weight models, so that a
// random-weight file has the same size, memory traffic and compute per token as the real one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cadenza::synth {

struct ModelShape {
  std::string preset;          // preset name, e.g. "qwen2.5-0.5b"
  std::string display_name;    // e.g. "Qwen2.5-0.5B"
  std::string arch;            // GGUF general.architecture: llama, qwen2, qwen3, qwen3moe, qwen2moe,
                               // deepseek2, glm4moe, gpt-oss, gemma3, phi3, mistral3, granite,
                               // granitehybrid
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;        // key/value length per head
  int64_t n_ff = 0;            // dense FFN width (MoE: shared/unused)
  int64_t n_expert = 0;        // 0 for dense models
  int64_t n_expert_used = 0;
  int64_t n_ff_expert = 0;     // per-expert FFN width
  int64_t n_ff_shared_expert = 0;  // qwen2moe: the gated shared expert's FFN width (0: none)
  bool shared_expert_gated = true;  // ffn_gate_inp_shexp (qwen2moe, qwen35moe); llama4: none
  // llama4 `interleave_moe_layer_step` S > 1: experts only in layers with (i + 1) % S == 0, the
  // others a dense FFN of n_ff.
  int64_t moe_interleave_step = 0;
  double rope_base = 10000.0;
  double rms_eps = 1e-5;
  bool tied_output = false;    // no output.weight; the embedding matrix is reused
  bool qkv_bias = false;       // qwen2
  bool qk_norm = false;        // qwen3, qwen3moe
  // Llama 3 rope scaling, written as a rope_freqs.weight tensor (factor 0 = none).
  double rope_scale_factor = 0;
  double rope_low_freq_factor = 1;
  double rope_high_freq_factor = 4;
  int64_t rope_original_ctx = 8192;
  std::string vocab_style;     // the real model's tokenizer family, for the help text
  // Control tokens the built-in byte-level vocabulary gets after BOS and EOS (a vision model's
  // image delimiters, a chat template's turn markers), so that prompts can name them.
  std::vector<std::string> extra_special_tokens;
  // Embedding and reranking models: `<arch>.pooling_type` (model/pooling.h: 1 mean, 2 CLS,
  // 3 last token, 4 rank); -1: not written (a generative model).
  int64_t pooling_type = -1;
  // bert cross-encoders (rerankers): the classification head's classes (cls.output); 0: none.
  int64_t n_cls_out = 0;

  // deepseek2 (multi-head latent attention and its MoE; synth/plan_deepseek2.cpp). head_dim is
  // unused there: the per-head sizes are mla_nope + mla_rope (query/key) and mla_v (value).
  int64_t mla_q_rank = 0;      // 0: attn_q.weight instead of the query latent
  int64_t mla_kv_rank = 0;
  int64_t mla_nope = 0;
  int64_t mla_rope = 0;
  int64_t mla_v = 0;
  int64_t n_leading_dense = 0;   // leading layers with a dense FFN of n_ff
  int64_t n_expert_shared = 0;   // ungated shared experts of n_ff_expert each
  bool expert_sigmoid = false;   // sigmoid gating with a selection bias (exp_probs_b)
  bool expert_weights_norm = true;
  double expert_weights_scale = 1.0;
  int64_t n_expert_groups = 1;
  int64_t n_expert_groups_used = 1;
  // glm4moe (synth/plan_glm4moe.cpp; also uses the leading-dense, shared-expert and routing
  // fields above): RoPE on the first rope_dims elements of each head (0: all of head_dim), and
  // multi-token-prediction layers written after the n_layer decoder layers.
  int64_t rope_dims = 0;
  int64_t n_nextn_layers = 0;
  // YaRN rope scaling (factor 0: none)
  double yarn_factor = 0;
  int64_t yarn_original_ctx = 4096;
  double yarn_log_multiplier = 0;
  // gpt-oss: sliding-window attention on alternating layers (0: none). gemma3: on all but each
  // 6th layer; phi3: on every layer.
  int64_t sliding_window = 0;

  // qwen35 (synth/plan_qwen35.cpp): Gated DeltaNet linear-attention layers, every
  // full_attention_interval-th layer (layers interval-1, 2*interval-1, ...) gated full attention.
  // ssm_*: the linear layers' short-conv kernel, key heads (`ssm.group_count`) of ssm_k_dim
  // (`ssm.state_size`), value heads (`ssm.time_step_rank`) of ssm_v_dim (`ssm.inner_size` =
  // ssm_v_heads * ssm_v_dim).
  int64_t full_attention_interval = 0;
  int64_t ssm_conv_kernel = 0;
  int64_t ssm_k_heads = 0;
  int64_t ssm_k_dim = 0;
  int64_t ssm_v_heads = 0;
  int64_t ssm_v_dim = 0;
  // granitehybrid (synth/plan_granitehybrid.cpp) reuses the ssm_* fields for its Mamba-2 layers:
  // ssm_k_heads groups (`ssm.group_count`) of state ssm_k_dim (`ssm.state_size`), ssm_v_heads
  // heads (`ssm.time_step_rank`) of ssm_v_dim (`ssm.inner_size` = heads x head dim); attention on
  // every full_attention_interval-th layer. no_rope: `rope.scaling.finetuned` false (Granite
  // 4.0-H's attention layers use no positional encoding).
  bool no_rope = false;
  // gemma3 (synth/plan_gemma3.cpp): the windowed layers' RoPE base, and linear RoPE scaling of
  // the global layers (factor 0: none).
  double rope_base_swa = 10000.0;
  double rope_linear_factor = 0;
  // phi3 (synth/plan_phi3.cpp): LongRoPE factor tensors (rope_factors_short/long.weight) with
  // `rope.scaling.attn_factor` and `rope.scaling.original_context_length` = yarn_original_ctx.
  bool longrope = false;
  double rope_attn_factor = 1.0;
  // mistral3: the attention temperature (`attention.temperature_scale`; 0: none); its length is
  // the YaRN original context (yarn_original_ctx).
  double attn_temperature_scale = 0;
  // granite: `embedding_scale`, `residual_scale`, `attention.scale`, `logit_scale` (0: not
  // written).
  double embedding_scale = 0;
  double residual_scale = 0;
  double attention_scale = 0;
  double logit_scale = 0;
};

const std::vector<ModelShape>& presets();
std::optional<ModelShape> find_preset(std::string_view name);

}  // namespace cadenza::synth
