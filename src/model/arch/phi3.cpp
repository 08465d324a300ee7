// phi3: Microsoft Phi-3, Phi-3.5 and Phi-4 (mini and 14B) dense models (general.architecture
// "phi3"). The llama decoder (llama.h) with
//  - NeoX RoPE (halves), possibly partial (`rope.dimension_count` < head dim: Phi-4-mini's 0.75);
//  - a fused QKV projection (`attn_qkv.weight`, the rows of q, k, v) when layer 0 has one, else
//    separate attn_{q,k,v};
//  - a fused gate/up projection (`ffn_up.weight` of 2 x `feed_forward_length` rows: the gate's
//    rows first, as HF's gate_up_proj.chunk(2)) when the file has no `ffn_gate`;
//  - a sliding window on every layer when the file has `attention.sliding_window` (HF
//    sliding_window; Phi-3-mini-4k: 2047) that is shorter than the context;
//  - LongRoPE (`rope_factors_short.weight` / `rope_factors_long.weight`, [rope dims / 2] divisors
//    per rotated pair, `rope.scaling.attn_factor`, `rope.scaling.original_context_length`): the
//    short factors are used and the context is capped at the original context length, where
//    they are the model's (HF switches to the long factors for longer sequences, which a cache
//    of rotated keys cannot do per sequence here). The rotation is scaled by the attn_factor
//    key, else by HF's sqrt(1 + ln(context / original) / ln(original)).
#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "gguf/gguf.h"
#include "model/arch/llama.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

Status read_longrope(const MetadataReader& md, ModelConfig& c) {
  const std::string& file = md.file().name();
  c.rope_freqs_tensor = "rope_factors_short.weight";
  Result<int64_t> original =
      md.count("rope.scaling.original_context_length", 1, limits::kMaxContext);
  if (!original) {
    return make_error("{}: LongRoPE factors ('rope_factors_short.weight') need key '{}': {}", file,
                      md.key("rope.scaling.original_context_length"), original.error());
  }
  double attn_factor = 1.0;
  if (md.has("rope.scaling.attn_factor")) {
    Result<double> v = md.real_or("rope.scaling.attn_factor", 1.0);
    if (!v) return v.error_value();
    attn_factor = *v;
  } else if (c.context_length > *original) {
    const double scale = static_cast<double>(c.context_length) / static_cast<double>(*original);
    attn_factor = std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(*original)));
  }
  if (!(attn_factor > 0)) {
    return make_error("{}: key '{}' = {} must be positive", file,
                      md.key("rope.scaling.attn_factor"), attn_factor);
  }
  c.rope_attn_factor = static_cast<float>(attn_factor);
  if (c.context_length > *original) {
    spdlog::info("{}: LongRoPE: using the short factors, so the context is capped at {} "
                 "(rope.scaling.original_context_length) instead of {}", file, *original,
                 c.context_length);
    c.context_length = *original;
  }
  return {};
}

Status configure(const MetadataReader& md, ModelConfig& c) {
  const gguf::GgufFile& file = md.file();
  c.rope_layout = kernels::RopeLayout::NeoX;
  c.fused_qkv = file.find_tensor("blk.0.attn_qkv.weight") != nullptr;
  c.fused_gate_up = file.find_tensor("blk.0.ffn_gate.weight") == nullptr;
  if (file.find_tensor("rope_factors_short.weight") != nullptr) {
    if (Status st = read_longrope(md, c); !st) return st;
  } else if (file.find_tensor("rope_factors_long.weight") != nullptr) {
    return make_error("{}: tensor 'rope_factors_long.weight' without 'rope_factors_short.weight' "
                      "is not supported", file.name());
  }
  if (md.has("attention.sliding_window")) {
    Result<int64_t> window = md.count("attention.sliding_window", 0, limits::kMaxContext);
    if (!window) return window.error_value();
    if (*window > 0 && *window < c.context_length) {
      c.attn_window = *window;
      c.attn_window_layers.assign(static_cast<size_t>(c.n_layers), true);
    }
  }
  return read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::None});
}

}  // namespace

extern const ArchitectureFamily phi3_family{"phi3", &configure, &load_network<LlamaDecoder>};

}  // namespace cadenza::model::arch
