// The keys of the llama-shaped families beyond llama's (their tensors are llama's, synth.cpp):
//  - mistral3 (Ministral 3): YaRN (`rope.scaling.type` yarn, factor, original context,
//    beta fast 32 / slow 1, `yarn_log_multiplier` = mscale_all_dim) and the attention
//    temperature `attention.temperature_scale` (its length: the YaRN original context);
//  - granite (Granite 3.x): `embedding_scale`, `residual_scale`, `attention.scale`, `logit_scale`.
#include <string>

#include "synth/plan.h"

namespace cadenza::synth {

void set_llama_variant_metadata(gguf::GgufWriter& w, const ModelShape& m) {
  using gguf::Value;
  const std::string a = m.arch + ".";
  auto f32 = [](double v) { return Value::f32(static_cast<float>(v)); };
  if (m.yarn_factor > 0) {
    w.set(a + "rope.scaling.type", Value::string("yarn"));
    w.set(a + "rope.scaling.factor", f32(m.yarn_factor));
    w.set(a + "rope.scaling.original_context_length",
          Value::u32(static_cast<uint32_t>(m.yarn_original_ctx)));
    w.set(a + "rope.scaling.yarn_beta_fast", f32(32.0));
    w.set(a + "rope.scaling.yarn_beta_slow", f32(1.0));
    w.set(a + "rope.scaling.yarn_log_multiplier", f32(m.yarn_log_multiplier));
  }
  if (m.attn_temperature_scale > 0) {
    w.set(a + "attention.temperature_scale", f32(m.attn_temperature_scale));
  }
  if (m.embedding_scale > 0) w.set(a + "embedding_scale", f32(m.embedding_scale));
  if (m.residual_scale > 0) w.set(a + "residual_scale", f32(m.residual_scale));
  if (m.attention_scale > 0) w.set(a + "attention.scale", f32(m.attention_scale));
  if (m.logit_scale > 0) w.set(a + "logit_scale", f32(m.logit_scale));
}

}  // namespace cadenza::synth
