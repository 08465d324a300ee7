// The granitehybrid tensors and keys of a synthetic model (IBM Granite 4.0's hybrid: Mamba-2
// layers with an attention layer every full_attention_interval-th). Names and shapes as the
// reference engine reads a granitehybrid file:
//  - every layer: attn_norm, ffn_norm and the FFN: ffn_{gate,up,down} (dense), or routed experts
//    with an ungated shared expert (`_shexp`, plan_routed_ffn) when m.n_expert > 0;
//  - Mamba-2 layers: ssm_in ([d] -> z (inner), xBC (inner + 2 x groups x state), dt (heads)),
//    ssm_conv1d ([kernel] x xBC channels, f32) and its bias, ssm_dt.bias, ssm_a ([1][heads],
//    negative: the converter stores -exp(A_log)), ssm_d ([1][heads]), ssm_norm ([inner / groups]
//    x groups), ssm_out (inner -> d);
//  - attention layers: attn_{q,k,v,output} (no biases, no Q/K norms).
// Keys: `attention.head_count_kv` per layer (0 on the Mamba-2 layers: that is how the file says
// which layers are recurrent), `ssm.{conv_kernel,state_size,group_count,time_step_rank,
// inner_size}`, Granite's four multipliers (plan_llama_variants.cpp) and
// `rope.scaling.finetuned` (false with m.no_rope: Granite 4.0-H uses no positional encoding).
#include <string>
#include <vector>

#include "synth/plan.h"

namespace cadenza::synth {

namespace {
bool attention_layer(const ModelShape& m, int64_t i) {
  return (i + 1) % m.full_attention_interval == 0;
}
}  // namespace

std::vector<TensorPlan> plan_granitehybrid(const ModelShape& m, const TypeScheme& scheme,
                                           int64_t n_vocab) {
  std::vector<TensorPlan> t;
  PlanBuilder b{t};
  const int64_t d = m.n_embd, q_dim = m.n_head * m.head_dim, kv_dim = m.n_head_kv * m.head_dim;
  const int64_t inner = m.ssm_v_heads * m.ssm_v_dim, groups = m.ssm_k_heads;
  const int64_t xbc = inner + 2 * groups * m.ssm_k_dim;
  b.matrix("token_embd.weight", d, n_vocab,
           m.tied_output ? output_type(scheme) : embedding_type(scheme));
  for (int64_t i = 0; i < m.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    b.vec(p + "attn_norm.weight", d, Init::kOnes);
    if (attention_layer(m, i)) {
      b.matrix(p + "attn_q.weight", d, q_dim, scheme.base);
      b.matrix(p + "attn_k.weight", d, kv_dim, scheme.base);
      b.matrix(p + "attn_v.weight", d, kv_dim, scheme.base);
      b.matrix(p + "attn_output.weight", q_dim, d, scheme.base);
    } else {
      b.matrix(p + "ssm_in.weight", d, inner + xbc + m.ssm_v_heads, scheme.base);
      t.push_back({p + "ssm_conv1d.weight", {m.ssm_conv_kernel, xbc}, DType::F32, Init::kNormal});
      b.vec(p + "ssm_conv1d.bias", xbc, Init::kSmall);
      b.vec(p + "ssm_dt.bias", m.ssm_v_heads, Init::kSmall);
      t.push_back({p + "ssm_a", {1, m.ssm_v_heads}, DType::F32, Init::kNegative});
      t.push_back({p + "ssm_d", {1, m.ssm_v_heads}, DType::F32, Init::kSmall});
      t.push_back({p + "ssm_norm.weight", {inner / groups, groups}, DType::F32, Init::kOnes});
      b.matrix(p + "ssm_out.weight", inner, d, scheme.base);
    }
    b.vec(p + "ffn_norm.weight", d, Init::kOnes);
    plan_ffn(t, m, scheme, p, /*routed=*/m.n_expert > 0, false);
  }
  b.vec("output_norm.weight", d, Init::kOnes);
  if (!m.tied_output) b.matrix("output.weight", d, n_vocab, output_type(scheme));
  return t;
}

void set_granitehybrid_metadata(gguf::GgufWriter& w, const ModelShape& m) {
  using gguf::Value;
  const std::string a = m.arch + ".";
  std::vector<int32_t> kv_heads;
  for (int64_t i = 0; i < m.n_layer; ++i) {
    kv_heads.push_back(attention_layer(m, i) ? static_cast<int32_t>(m.n_head_kv) : 0);
  }
  w.set(a + "attention.head_count_kv", Value::i32_array(kv_heads));
  w.set(a + "ssm.conv_kernel", Value::u32(static_cast<uint32_t>(m.ssm_conv_kernel)));
  w.set(a + "ssm.state_size", Value::u32(static_cast<uint32_t>(m.ssm_k_dim)));
  w.set(a + "ssm.group_count", Value::u32(static_cast<uint32_t>(m.ssm_k_heads)));
  w.set(a + "ssm.time_step_rank", Value::u32(static_cast<uint32_t>(m.ssm_v_heads)));
  w.set(a + "ssm.inner_size", Value::u32(static_cast<uint32_t>(m.ssm_v_heads * m.ssm_v_dim)));
  w.set(a + "rope.scaling.finetuned", Value::boolean(!m.no_rope));
}

}  // namespace cadenza::synth
