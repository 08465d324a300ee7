// The gpt-oss tensors and keys of a synthetic model, named and shaped as the reference converter
// writes gpt-oss-20b / 120b: q/k/v/output biases, one attention-sink logit per head
// (`attn_sinks.weight`), `post_attention_norm` before the experts, a router bias and per-expert
// gate/up/down biases; the sliding window and YaRN keys. With the "mxfp4_moe" scheme the expert
// matrices are MXFP4 (as in the released files) and the rest Q8_0 ("mxfp4_moe_f16": F16).
#include <string>

#include "synth/plan.h"

namespace cadenza::synth {

std::vector<TensorPlan> plan_gpt_oss(const ModelShape& m, const TypeScheme& scheme,
                                     int64_t n_vocab) {
  std::vector<TensorPlan> t;
  PlanBuilder b{t};
  const int64_t d = m.n_embd, q_dim = m.n_head * m.head_dim, kv_dim = m.n_head_kv * m.head_dim;
  const int64_t e = m.n_expert, f = m.n_ff_expert;
  const DType ex = expert_type(scheme);
  // An expert tensor: `count` matrices of `out` rows of `in`.
  auto experts = [&](std::string name, int64_t in, int64_t out, int64_t count, DType type) {
    t.push_back({std::move(name), {in, out, count}, fit_row(type, in), Init::kNormal});
  };
  // A bias per expert: `count` rows of `n` f32 values.
  auto expert_bias = [&](std::string name, int64_t n, int64_t count) {
    t.push_back({std::move(name), {n, count}, DType::F32, Init::kSmall});
  };
  b.matrix("token_embd.weight", d, n_vocab, scheme.base);
  for (int64_t i = 0; i < m.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    b.vec(p + "attn_norm.weight", d, Init::kOnes);
    b.matrix(p + "attn_q.weight", d, q_dim, scheme.base);
    b.vec(p + "attn_q.bias", q_dim, Init::kSmall);
    b.matrix(p + "attn_k.weight", d, kv_dim, scheme.base);
    b.vec(p + "attn_k.bias", kv_dim, Init::kSmall);
    b.matrix(p + "attn_v.weight", d, kv_dim, scheme.base);
    b.vec(p + "attn_v.bias", kv_dim, Init::kSmall);
    b.matrix(p + "attn_output.weight", q_dim, d, scheme.base);
    b.vec(p + "attn_output.bias", d, Init::kSmall);
    // N(0, 1/H): sinks of the order of the scores, so that they matter.
    b.vec(p + "attn_sinks.weight", m.n_head, Init::kNormal);
    b.vec(p + "post_attention_norm.weight", d, Init::kOnes);
    t.push_back({p + "ffn_gate_inp.weight", {d, e}, DType::F32, Init::kNormal});
    b.vec(p + "ffn_gate_inp.bias", e, Init::kSmall);
    experts(p + "ffn_gate_exps.weight", d, f, e, ex);
    expert_bias(p + "ffn_gate_exps.bias", f, e);
    experts(p + "ffn_up_exps.weight", d, f, e, ex);
    expert_bias(p + "ffn_up_exps.bias", f, e);
    experts(p + "ffn_down_exps.weight", f, d, e, ex);
    expert_bias(p + "ffn_down_exps.bias", d, e);
  }
  b.vec("output_norm.weight", d, Init::kOnes);
  b.matrix("output.weight", d, n_vocab, output_type(scheme));
  return t;
}

void set_gpt_oss_metadata(gguf::GgufWriter& w, const ModelShape& m) {
  using gguf::Value;
  const std::string a = m.arch + ".";
  auto u32 = [](int64_t v) { return Value::u32(static_cast<uint32_t>(v)); };
  w.set(a + "attention.sliding_window", u32(m.sliding_window));
  if (m.yarn_factor > 0) {
    w.set(a + "rope.scaling.type", Value::string("yarn"));
    w.set(a + "rope.scaling.factor", Value::f32(static_cast<float>(m.yarn_factor)));
    w.set(a + "rope.scaling.original_context_length", u32(m.yarn_original_ctx));
  }
}

}  // namespace cadenza::synth
