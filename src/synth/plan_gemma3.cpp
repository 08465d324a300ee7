// The gemma3 tensors and keys of a synthetic model, named and shaped as the reference converter
// writes Gemma 3: per layer attn_norm, attn_{q,k,v,output}, per-head attn_{q,k}_norm,
// post_attention_norm, ffn_norm, ffn_{gate,up,down}, post_ffw_norm; the output tied to the
// embedding. Norm weights are 1 (the stored (1 + w) of a zero-initialised Gemma norm). Keys: the
// sliding window, the windowed layers' RoPE base and the global layers' linear scaling.
#include <string>

#include "synth/plan.h"

namespace cadenza::synth {

std::vector<TensorPlan> plan_gemma3(const ModelShape& m, const TypeScheme& scheme,
                                    int64_t n_vocab) {
  std::vector<TensorPlan> t;
  PlanBuilder b{t};
  const int64_t d = m.n_embd, q_dim = m.n_head * m.head_dim, kv_dim = m.n_head_kv * m.head_dim;
  b.matrix("token_embd.weight", d, n_vocab, output_type(scheme));  // tied
  for (int64_t i = 0; i < m.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const bool more = scheme.k_mix && use_more_bits(i, m.n_layer);
    b.vec(p + "attn_norm.weight", d, Init::kOnes);
    b.matrix(p + "attn_q.weight", d, q_dim, scheme.base);
    b.matrix(p + "attn_k.weight", d, kv_dim, scheme.base);
    b.matrix(p + "attn_v.weight", d, kv_dim, more ? DType::Q6_K : scheme.base);
    b.vec(p + "attn_q_norm.weight", m.head_dim, Init::kOnes);
    b.vec(p + "attn_k_norm.weight", m.head_dim, Init::kOnes);
    b.matrix(p + "attn_output.weight", q_dim, d, scheme.base);
    b.vec(p + "post_attention_norm.weight", d, Init::kOnes);
    b.vec(p + "ffn_norm.weight", d, Init::kOnes);
    plan_dense_ffn(t, m, scheme, p, more);
    b.vec(p + "post_ffw_norm.weight", d, Init::kOnes);
  }
  b.vec("output_norm.weight", d, Init::kOnes);
  return t;
}

void set_gemma3_metadata(gguf::GgufWriter& w, const ModelShape& m) {
  using gguf::Value;
  const std::string a = m.arch + ".";
  // Gemma 3 writes the head size even where it equals embd / heads.
  w.set(a + "attention.key_length", Value::u32(static_cast<uint32_t>(m.head_dim)));
  w.set(a + "attention.value_length", Value::u32(static_cast<uint32_t>(m.head_dim)));
  w.set(a + "attention.sliding_window", Value::u32(static_cast<uint32_t>(m.sliding_window)));
  w.set(a + "rope.freq_base_swa", Value::f32(static_cast<float>(m.rope_base_swa)));
  if (m.rope_linear_factor > 0) {
    w.set(a + "rope.scaling.type", Value::string("linear"));
    w.set(a + "rope.scaling.factor", Value::f32(static_cast<float>(m.rope_linear_factor)));
  }
}

}  // namespace cadenza::synth
