// The glm4moe tensors and keys of a synthetic model (GLM-4.5 / 4.6): GQA attention with q/k/v
// biases and optional per-head Q/K norms, partial RoPE (`rope.dimension_count` < key_length), the
// FFN's input norm as `post_attention_norm`, leading dense layers, sigmoid-gated experts with a
// selection bias and shared experts, and the multi-token-prediction layers after the decoder
// layers (a full layer plus its nextn.* tensors each). Names and shapes are GGUF's, so the file
// loads in other engines too.
#include <string>

#include "synth/plan.h"

namespace cadenza::synth {

std::vector<TensorPlan> plan_glm4moe(const ModelShape& m, const TypeScheme& scheme,
                                     int64_t n_vocab) {
  std::vector<TensorPlan> t;
  PlanBuilder b{t};
  const int64_t d = m.n_embd, q_dim = m.n_head * m.head_dim, kv_dim = m.n_head_kv * m.head_dim;
  const int64_t n_blocks = m.n_layer + m.n_nextn_layers;
  // An expert tensor: `count` matrices of `out` rows of `in`.
  auto experts = [&](std::string name, int64_t in, int64_t out, int64_t count, DType type) {
    t.push_back({std::move(name), {in, out, count}, fit_row(type, in), Init::kNormal});
  };
  b.matrix("token_embd.weight", d, n_vocab, m.tied_output ? output_type(scheme) : embedding_type(scheme));
  for (int64_t i = 0; i < n_blocks; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const bool more = scheme.k_mix && use_more_bits(i, n_blocks);
    b.vec(p + "attn_norm.weight", d, Init::kOnes);
    b.matrix(p + "attn_q.weight", d, q_dim, scheme.base);
    b.matrix(p + "attn_k.weight", d, kv_dim, scheme.base);
    b.matrix(p + "attn_v.weight", d, kv_dim, more ? DType::Q6_K : scheme.base);
    if (m.qkv_bias) {
      b.vec(p + "attn_q.bias", q_dim, Init::kSmall);
      b.vec(p + "attn_k.bias", kv_dim, Init::kSmall);
      b.vec(p + "attn_v.bias", kv_dim, Init::kSmall);
    }
    if (m.qk_norm) {
      b.vec(p + "attn_q_norm.weight", m.head_dim, Init::kOnes);
      b.vec(p + "attn_k_norm.weight", m.head_dim, Init::kOnes);
    }
    b.matrix(p + "attn_output.weight", q_dim, d, scheme.base);
    b.vec(p + "post_attention_norm.weight", d, Init::kOnes);
    if (i < m.n_leading_dense) {
      plan_dense_ffn(t, m, scheme, p, more);
    } else {
      t.push_back({p + "ffn_gate_inp.weight", {d, m.n_expert}, DType::F32, Init::kNormal});
      b.vec(p + "exp_probs_b.bias", m.n_expert, Init::kSmall);
      experts(p + "ffn_gate_exps.weight", d, m.n_ff_expert, m.n_expert, scheme.base);
      experts(p + "ffn_up_exps.weight", d, m.n_ff_expert, m.n_expert, scheme.base);
      experts(p + "ffn_down_exps.weight", m.n_ff_expert, d, m.n_expert,
              more ? DType::Q6_K : scheme.base);
      if (m.n_expert_shared > 0) {
        const int64_t fs = m.n_ff_expert * m.n_expert_shared;
        b.matrix(p + "ffn_gate_shexp.weight", d, fs, scheme.base);
        b.matrix(p + "ffn_up_shexp.weight", d, fs, scheme.base);
        b.matrix(p + "ffn_down_shexp.weight", fs, d, more ? DType::Q6_K : scheme.base);
      }
    }
    if (i >= m.n_layer) {  // a multi-token-prediction layer: [embedding | hidden] -> d
      b.matrix(p + "nextn.eh_proj.weight", 2 * d, d, scheme.base);
      b.vec(p + "nextn.enorm.weight", d, Init::kOnes);
      b.vec(p + "nextn.hnorm.weight", d, Init::kOnes);
      b.vec(p + "nextn.shared_head_norm.weight", d, Init::kOnes);
    }
  }
  b.vec("output_norm.weight", d, Init::kOnes);
  if (!m.tied_output) b.matrix("output.weight", d, n_vocab, output_type(scheme));
  return t;
}

void set_glm4moe_metadata(gguf::GgufWriter& w, const ModelShape& m) {
  using gguf::Value;
  const std::string a = "glm4moe.";
  auto u32 = [](int64_t v) { return Value::u32(static_cast<uint32_t>(v)); };
  // block_count counts the multi-token-prediction layers too, as converters write it.
  w.set(a + "block_count", u32(m.n_layer + m.n_nextn_layers));
  w.set(a + "nextn_predict_layers", u32(m.n_nextn_layers));
  w.set(a + "rope.dimension_count", u32(m.rope_dims > 0 ? m.rope_dims : m.head_dim));
  w.set(a + "leading_dense_block_count", u32(m.n_leading_dense));
  w.set(a + "expert_shared_count", u32(m.n_expert_shared));
  w.set(a + "expert_weights_scale", Value::f32(static_cast<float>(m.expert_weights_scale)));
  w.set(a + "expert_weights_norm", Value::boolean(m.expert_weights_norm));
  w.set(a + "expert_gating_func", u32(m.expert_sigmoid ? 2 : 1));
  if (m.n_expert_groups > 1) {
    w.set(a + "expert_group_count", u32(m.n_expert_groups));
    w.set(a + "expert_group_used_count", u32(m.n_expert_groups_used));
  }
}

}  // namespace cadenza::synth
