// mistral3: the text model of Mistral Small 3.x and Ministral 3 (general.architecture
// "mistral3"). The llama decoder (llama.h: RoPE on adjacent pairs, as the converter permutes
// Q/K like llama's), with what the file's keys add:
//  - YaRN (`rope.scaling.type` yarn, `factor`, `original_context_length`, `yarn_beta_fast/slow`,
//    read by config.cpp). The rotation's scale is HF's YaRN attention factor with mscale 1:
//    mscale(factor, 1) / mscale(factor, m), mscale(s, m) = 1 + 0.1 m ln s, m =
//    `rope.scaling.yarn_log_multiplier` (mscale_all_dim; Ministral 3: 1, so the ratio is 1);
//    without that key, HF's default 1 + 0.1 ln(factor).
//  - The attention temperature (HF llama_4_scaling_beta, `attention.temperature_scale`): the
//    query of a token at position p times 1 + beta ln(1 + floor(p / L)), L =
//    `attention.temperature_length`, else `rope.scaling.original_context_length`.
// Experts when `expert_count` > 0, as llama (Mixtral layout).
#include <cmath>

#include "gguf/gguf.h"
#include "model/arch/llama.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

Status configure(const MetadataReader& md, ModelConfig& c) {
  const std::string& file = md.file().name();
  c.rope_layout = kernels::RopeLayout::Normal;
  c.qkv_bias = false;
  if (md.has("rope.scaling.yarn_log_multiplier") && md.has("rope.scaling.factor")) {
    Result<double> factor = md.real_or("rope.scaling.factor", 1.0);
    if (!factor) return factor.error_value();
    Result<double> m = md.real_or("rope.scaling.yarn_log_multiplier", 0.0);
    if (!m) return m.error_value();
    if (*factor > 1 && *m > 0) {
      const double ln = std::log(*factor);
      c.yarn_rotation_scale = static_cast<float>((1.0 + 0.1 * ln) / (1.0 + 0.1 * *m * ln));
    }
  }
  if (md.has("attention.temperature_scale")) {
    Result<double> beta = md.real_or("attention.temperature_scale", 0.0);
    if (!beta) return beta.error_value();
    if (*beta != 0) {
      const char* length_key = md.has("attention.temperature_length")
                                   ? "attention.temperature_length"
                                   : "rope.scaling.original_context_length";
      Result<int64_t> length = md.count(length_key, 1, limits::kMaxContext);
      if (!length) {
        return make_error("{}: key '{}' (the attention temperature) needs '{}': {}", file,
                          md.key("attention.temperature_scale"), md.key(length_key),
                          length.error());
      }
      c.attn_temperature_beta = static_cast<float>(*beta);
      c.attn_temperature_length = static_cast<int32_t>(*length);
    }
  }
  return read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::Optional,
                                   .normalize_top_k = true});
}

}  // namespace

extern const ArchitectureFamily mistral3_family{"mistral3", &configure,
                                                &load_network<LlamaDecoder>};

}  // namespace cadenza::model::arch
