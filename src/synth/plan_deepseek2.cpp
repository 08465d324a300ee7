// The deepseek2 tensors and keys of a synthetic model: multi-head latent attention in the layout
// of current converters (attn_k_b / attn_v_b, the compressed cache as one KV head) and the
// DeepSeek MoE (leading dense layers, shared experts, sigmoid gating with a selection bias,
// groups, YaRN). Names and shapes are GGUF's, so the file loads in other engines too.
#include <string>

#include "synth/plan.h"

namespace cadenza::synth {

std::vector<TensorPlan> plan_deepseek2(const ModelShape& m, const TypeScheme& scheme,
                                       int64_t n_vocab) {
  std::vector<TensorPlan> t;
  PlanBuilder b{t};
  const int64_t d = m.n_embd, h = m.n_head, dq = m.mla_nope + m.mla_rope;
  // An expert tensor: `count` matrices of `out` rows of `in`.
  auto experts = [&](std::string name, int64_t in, int64_t out, int64_t count, DType type) {
    t.push_back({std::move(name), {in, out, count}, fit_row(type, in), Init::kNormal});
  };
  b.matrix("token_embd.weight", d, n_vocab,
           m.tied_output ? output_type(scheme) : embedding_type(scheme));
  for (int64_t i = 0; i < m.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const bool more = scheme.k_mix && use_more_bits(i, m.n_layer);
    b.vec(p + "attn_norm.weight", d, Init::kOnes);
    if (m.mla_q_rank > 0) {
      b.matrix(p + "attn_q_a.weight", d, m.mla_q_rank, scheme.base);
      b.vec(p + "attn_q_a_norm.weight", m.mla_q_rank, Init::kOnes);
      b.matrix(p + "attn_q_b.weight", m.mla_q_rank, h * dq, scheme.base);
    } else {
      b.matrix(p + "attn_q.weight", d, h * dq, scheme.base);
    }
    b.matrix(p + "attn_kv_a_mqa.weight", d, m.mla_kv_rank + m.mla_rope, scheme.base);
    b.vec(p + "attn_kv_a_norm.weight", m.mla_kv_rank, Init::kOnes);
    experts(p + "attn_k_b.weight", m.mla_nope, m.mla_kv_rank, h, scheme.base);
    experts(p + "attn_v_b.weight", m.mla_kv_rank, m.mla_v, h, more ? DType::Q6_K : scheme.base);
    b.matrix(p + "attn_output.weight", h * m.mla_v, d, scheme.base);
    b.vec(p + "ffn_norm.weight", d, Init::kOnes);
    if (i < m.n_leading_dense || m.n_expert == 0) {
      plan_dense_ffn(t, m, scheme, p, more);
      continue;
    }
    t.push_back({p + "ffn_gate_inp.weight", {d, m.n_expert}, DType::F32, Init::kNormal});
    if (m.expert_sigmoid) b.vec(p + "exp_probs_b.bias", m.n_expert, Init::kSmall);
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
  b.vec("output_norm.weight", d, Init::kOnes);
  if (!m.tied_output) b.matrix("output.weight", d, n_vocab, output_type(scheme));
  return t;
}

void set_deepseek2_metadata(gguf::GgufWriter& w, const ModelShape& m) {
  using gguf::Value;
  const std::string a = "deepseek2.";
  auto u32 = [](int64_t v) { return Value::u32(static_cast<uint32_t>(v)); };
  // The compressed cache as one KV head of (latent | RoPE key); the per-head sizes in *_mla.
  w.set(a + "attention.head_count_kv", u32(1));
  w.set(a + "attention.key_length", u32(m.mla_kv_rank + m.mla_rope));
  w.set(a + "attention.value_length", u32(m.mla_kv_rank));
  w.set(a + "attention.key_length_mla", u32(m.mla_nope + m.mla_rope));
  w.set(a + "attention.value_length_mla", u32(m.mla_v));
  if (m.mla_q_rank > 0) w.set(a + "attention.q_lora_rank", u32(m.mla_q_rank));
  w.set(a + "attention.kv_lora_rank", u32(m.mla_kv_rank));
  w.set(a + "rope.dimension_count", u32(m.mla_rope));
  w.set(a + "leading_dense_block_count", u32(m.n_leading_dense));
  if (m.n_expert > 0) {
    w.set(a + "expert_feed_forward_length", u32(m.n_ff_expert));
    w.set(a + "expert_shared_count", u32(m.n_expert_shared));
    w.set(a + "expert_weights_scale", Value::f32(static_cast<float>(m.expert_weights_scale)));
    w.set(a + "expert_weights_norm", Value::boolean(m.expert_weights_norm));
    w.set(a + "expert_gating_func", u32(m.expert_sigmoid ? 2 : 1));
    if (m.n_expert_groups > 1) {
      w.set(a + "expert_group_count", u32(m.n_expert_groups));
      w.set(a + "expert_group_used_count", u32(m.n_expert_groups_used));
    }
  }
  if (m.yarn_factor > 0) {
    w.set(a + "rope.scaling.type", Value::string("yarn"));
    w.set(a + "rope.scaling.factor", Value::f32(static_cast<float>(m.yarn_factor)));
    w.set(a + "rope.scaling.original_context_length", u32(m.yarn_original_ctx));
    w.set(a + "rope.scaling.yarn_log_multiplier",
          Value::f32(static_cast<float>(m.yarn_log_multiplier)));
  }
}

}  // namespace cadenza::synth
