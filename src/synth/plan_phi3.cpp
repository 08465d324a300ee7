// The phi3 tensors and keys of a synthetic model, named and shaped as the reference converter
// writes Phi-3 / Phi-4: per layer attn_norm, the fused attn_qkv (rows of q, k, v), attn_output,
// ffn_norm, the fused ffn_up (2 x feed_forward_length rows: gate, then up) and ffn_down; the
// LongRoPE factor tensors rope_factors_{short,long} ([rope dims / 2]) with
// `rope.scaling.attn_factor` and `rope.scaling.original_context_length`; a sliding window when
// the shape has one.
#include <string>

#include "synth/plan.h"

namespace cadenza::synth {

std::vector<TensorPlan> plan_phi3(const ModelShape& m, const TypeScheme& scheme, int64_t n_vocab) {
  std::vector<TensorPlan> t;
  PlanBuilder b{t};
  const int64_t d = m.n_embd, q_dim = m.n_head * m.head_dim, kv_dim = m.n_head_kv * m.head_dim;
  const int64_t rope_dims = m.rope_dims > 0 ? m.rope_dims : m.head_dim;
  b.matrix("token_embd.weight", d, n_vocab,
           m.tied_output ? output_type(scheme) : embedding_type(scheme));
  if (m.longrope) {
    b.vec("rope_factors_long.weight", rope_dims / 2, Init::kOnes);   // values: synth.cpp
    b.vec("rope_factors_short.weight", rope_dims / 2, Init::kOnes);
  }
  for (int64_t i = 0; i < m.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const bool more = scheme.k_mix && use_more_bits(i, m.n_layer);
    b.vec(p + "attn_norm.weight", d, Init::kOnes);
    b.matrix(p + "attn_qkv.weight", d, q_dim + 2 * kv_dim, more ? DType::Q6_K : scheme.base);
    b.matrix(p + "attn_output.weight", q_dim, d, scheme.base);
    b.vec(p + "ffn_norm.weight", d, Init::kOnes);
    b.matrix(p + "ffn_up.weight", d, 2 * m.n_ff, scheme.base);
    b.matrix(p + "ffn_down.weight", m.n_ff, d, more ? DType::Q6_K : scheme.base);
  }
  b.vec("output_norm.weight", d, Init::kOnes);
  if (!m.tied_output) b.matrix("output.weight", d, n_vocab, output_type(scheme));
  return t;
}

void set_phi3_metadata(gguf::GgufWriter& w, const ModelShape& m) {
  using gguf::Value;
  const std::string a = m.arch + ".";
  if (m.sliding_window > 0) {
    w.set(a + "attention.sliding_window", Value::u32(static_cast<uint32_t>(m.sliding_window)));
  }
  if (m.longrope) {
    w.set(a + "rope.scaling.attn_factor", Value::f32(static_cast<float>(m.rope_attn_factor)));
    w.set(a + "rope.scaling.original_context_length",
          Value::u32(static_cast<uint32_t>(m.yarn_original_ctx)));
  }
}

}  // namespace cadenza::synth
