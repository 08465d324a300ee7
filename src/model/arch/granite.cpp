// granite: IBM Granite 3.x dense models (general.architecture "granite"). The llama decoder
// (llama.h: RoPE on adjacent pairs, as the converter permutes Q/K like llama's) with Granite's
// four multipliers, each from its key (default 1, i.e. plain llama):
//  - `granite.embedding_scale`   (HF embedding_multiplier): x = token_embd[tokens] * s;
//  - `granite.residual_scale`    (HF residual_multiplier): x = x + s * block(x), both blocks;
//  - `granite.attention.scale`   (HF attention_multiplier): the factor of q . k, replacing
//                                 1/sqrt(head_dim);
//  - `granite.logit_scale`       (HF logits_scaling): logits = output / s.
// Dense only (the MoE variants are the separate `granitemoe` architecture, not supported; the
// Granite 4.0 hybrids are `granitehybrid`). The multipliers' reader is shared (granite.h).
#include "model/arch/granite.h"

#include "gguf/gguf.h"
#include "model/arch/llama.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

// A positive multiplier key, `fallback` when missing.
Result<float> positive(const MetadataReader& md, const char* key, double fallback) {
  Result<double> v = md.real_or(key, fallback);
  if (!v) return v.error_value();
  if (!(*v > 0)) {
    return make_error("{}: key '{}' = {} must be positive", md.file().name(), md.key(key), *v);
  }
  return static_cast<float>(*v);
}

Status configure(const MetadataReader& md, ModelConfig& c) {
  c.rope_layout = kernels::RopeLayout::Normal;
  if (Status st = read_granite_multipliers(md, c); !st) return st;
  return read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::None});
}

}  // namespace

Status read_granite_multipliers(const MetadataReader& md, ModelConfig& c) {
  Result<float> v = positive(md, "embedding_scale", 1.0);
  if (!v) return v.error_value();
  c.embedding_scale = *v;
  if (v = positive(md, "residual_scale", 1.0); !v) return v.error_value();
  c.residual_scale = *v;
  if (md.has("attention.scale")) {
    if (v = positive(md, "attention.scale", 1.0); !v) return v.error_value();
    c.attn_scale = *v;
  }
  if (v = positive(md, "logit_scale", 1.0); !v) return v.error_value();
  c.logit_scale = 1.0f / *v;
  return {};
}

extern const ArchitectureFamily granite_family{"granite", &configure, &load_network<LlamaDecoder>};

}  // namespace cadenza::model::arch
