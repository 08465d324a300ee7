// The qwen35 tensors and keys of a synthetic model (Qwen3.5's hybrid: Gated DeltaNet
// linear-attention layers with gated full-attention layers every full_attention_interval-th).
// Names and shapes as the reference engine reads a qwen35 file:
//  - every layer: attn_norm, post_attention_norm (the FFN's pre-norm), ffn_{gate,up,down}
//    (qwen35moe: routed experts and a gated shared expert instead, plan_routed_ffn);
//  - linear layers: attn_qkv ([d] -> q, k of ssm_k_heads x ssm_k_dim, v of ssm_v_heads x
//    ssm_v_dim), attn_gate (the output gate z, [d] -> v width), ssm_beta and ssm_alpha ([d] ->
//    ssm_v_heads), ssm_conv1d ([kernel] x conv channels, f32), ssm_dt.bias and ssm_a
//    (ssm_v_heads; ssm_a negative: the converter stores -exp(A_log)), ssm_norm ([ssm_v_dim]),
//    ssm_out (v width -> d);
//  - attention layers: attn_q (query and its output gate, 2 x heads x head_dim), attn_k, attn_v,
//    attn_{q,k}_norm, attn_output.
// Norm weights are 1 (the converter stores Qwen3.5's zero-centred (1 + w) norms with the 1
// added); the output is tied when the shape says so.
#include <string>

#include "synth/plan.h"

namespace cadenza::synth {

std::vector<TensorPlan> plan_qwen35(const ModelShape& m, const TypeScheme& scheme,
                                    int64_t n_vocab) {
  std::vector<TensorPlan> t;
  PlanBuilder b{t};
  const int64_t d = m.n_embd, q_dim = m.n_head * m.head_dim, kv_dim = m.n_head_kv * m.head_dim;
  const int64_t k_width = m.ssm_k_heads * m.ssm_k_dim, v_width = m.ssm_v_heads * m.ssm_v_dim;
  const int64_t conv_channels = 2 * k_width + v_width;
  b.matrix("token_embd.weight", d, n_vocab,
           m.tied_output ? output_type(scheme) : embedding_type(scheme));
  for (int64_t i = 0; i < m.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const bool attention = (i + 1) % m.full_attention_interval == 0;
    b.vec(p + "attn_norm.weight", d, Init::kOnes);
    if (attention) {
      b.matrix(p + "attn_q.weight", d, 2 * q_dim, scheme.base);
      b.matrix(p + "attn_k.weight", d, kv_dim, scheme.base);
      b.matrix(p + "attn_v.weight", d, kv_dim, scheme.base);
      b.vec(p + "attn_q_norm.weight", m.head_dim, Init::kOnes);
      b.vec(p + "attn_k_norm.weight", m.head_dim, Init::kOnes);
      b.matrix(p + "attn_output.weight", q_dim, d, scheme.base);
    } else {
      b.matrix(p + "attn_qkv.weight", d, conv_channels, scheme.base);
      b.matrix(p + "attn_gate.weight", d, v_width, scheme.base);
      b.matrix(p + "ssm_beta.weight", d, m.ssm_v_heads, scheme.base);
      b.matrix(p + "ssm_alpha.weight", d, m.ssm_v_heads, scheme.base);
      t.push_back({p + "ssm_conv1d.weight", {m.ssm_conv_kernel, conv_channels}, DType::F32,
                   Init::kNormal});
      b.vec(p + "ssm_dt.bias", m.ssm_v_heads, Init::kSmall);
      t.push_back({p + "ssm_a", {m.ssm_v_heads}, DType::F32, Init::kNegative});
      b.vec(p + "ssm_norm.weight", m.ssm_v_dim, Init::kOnes);
      b.matrix(p + "ssm_out.weight", v_width, d, scheme.base);
    }
    b.vec(p + "post_attention_norm.weight", d, Init::kOnes);
    plan_ffn(t, m, scheme, p, /*routed=*/m.n_expert > 0, false);  // routed: qwen35moe
  }
  b.vec("output_norm.weight", d, Init::kOnes);
  if (!m.tied_output) b.matrix("output.weight", d, n_vocab, output_type(scheme));
  return t;
}

void set_qwen35_metadata(gguf::GgufWriter& w, const ModelShape& m) {
  using gguf::Value;
  const std::string a = m.arch + ".";
  w.set(a + "attention.key_length", Value::u32(static_cast<uint32_t>(m.head_dim)));
  w.set(a + "attention.value_length", Value::u32(static_cast<uint32_t>(m.head_dim)));
  w.set(a + "full_attention_interval",
        Value::u32(static_cast<uint32_t>(m.full_attention_interval)));
  w.set(a + "ssm.conv_kernel", Value::u32(static_cast<uint32_t>(m.ssm_conv_kernel)));
  w.set(a + "ssm.state_size", Value::u32(static_cast<uint32_t>(m.ssm_k_dim)));
  w.set(a + "ssm.group_count", Value::u32(static_cast<uint32_t>(m.ssm_k_heads)));
  w.set(a + "ssm.time_step_rank", Value::u32(static_cast<uint32_t>(m.ssm_v_heads)));
  w.set(a + "ssm.inner_size", Value::u32(static_cast<uint32_t>(m.ssm_v_heads * m.ssm_v_dim)));
  // Multi-section RoPE (text: the sections see one position, so it is plain RoPE on rope_dims).
  const int32_t q = static_cast<int32_t>(m.rope_dims / 2);
  std::vector<int32_t> sections = {q - 2 * (q / 3), q / 3, q / 3, 0};
  w.set(a + "rope.dimension_sections", Value::i32_array(sections));
}

}  // namespace cadenza::synth
