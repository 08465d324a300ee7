// glm4moe: GLM-4.5, GLM-4.5-Air, GLM-4.6 (general.architecture "glm4moe"). GQA attention with
// q/k/v biases (HF attention_bias), per-head Q/K RMS norm (use_qk_norm; not in every variant),
// NeoX RoPE on the first `rope.dimension_count` elements of each head (partial_rotary_factor 0.5:
// the rest pass unrotated); the first `leading_dense_block_count` layers (first_k_dense_replace)
// have a dense FFN, the rest sigmoid-gated routed experts with the selection bias
// (e_score_correction_bias), optional groups, top-k renormalised (norm_topk_prob) and scaled
// (routed_scaling_factor), plus `expert_shared_count` ungated shared experts, one SwiGLU FFN of
// that many expert widths.
//
//   x = token_embd[tokens]
//   for each layer:
//     x = x + Attention(rms_norm(x) * attn_norm)
//     h = rms_norm(x) * post_attention_norm                 (the FFN's input norm)
//     x = x + DenseFfn(h)                                   (leading dense layers)
//     x = x + SharedExperts(h) + RoutedExperts(h)           (the others, added in this order)
//   logits = OutputHead(x[logit rows])
//
// Multi-token-prediction layers (`nextn_predict_layers`, HF num_nextn_predict_layers) follow the
// trunk's layers in the file; they are not run: they are left out of the layer count and the load
// log says so. The network: arch/mixture_decoder.h (shared with llama4).

#include <spdlog/spdlog.h>

#include "gguf/gguf.h"
#include "model/arch/mixture_decoder.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

Status configure(const MetadataReader& md, ModelConfig& c) {
  const std::string& file = md.file().name();
  c.rope_layout = kernels::RopeLayout::NeoX;
  c.ffn_norm_tensor = "post_attention_norm.weight";
  // Biases and Q/K norms as layer 0 has them (then every layer must).
  c.qkv_bias = md.file().find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = md.file().find_tensor("blk.0.attn_q_norm.weight") != nullptr;

  // Multi-token prediction layers follow the trunk's layers; they are not run.
  Result<int64_t> v = md.count_or("nextn_predict_layers", 0, 0, c.n_layers - 1);
  if (!v) return v.error_value();
  if (*v > 0) {
    spdlog::info("{}: skipping {} multi-token-prediction layer(s) (blk.{}..{}); only the {} "
                 "decoder layers run", file, *v, c.n_layers - *v, c.n_layers - 1, c.n_layers - *v);
    c.n_layers -= *v;
  }

  Status st = read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::Required,
                                        .normalize_top_k = true,
                                        .gating_func = 2});
  if (!st) return st;
  if (v = md.count_or("leading_dense_block_count", 0, 0, c.n_layers); !v) return v.error_value();
  c.n_leading_dense = *v;
  if (c.n_leading_dense > 0 && c.n_ff == 0) {
    return make_error("{}: key '{}' is missing or 0, but the first {} layer(s) are dense "
                      "('{}')", file, md.key("feed_forward_length"), c.n_leading_dense,
                      md.key("leading_dense_block_count"));
  }
  if (v = md.count_or("expert_shared_count", 0, 0, limits::kMaxExperts); !v) return v.error_value();
  c.n_ff_shared_expert = *v * c.n_ff_expert;
  return {};
}

}  // namespace

extern const ArchitectureFamily glm4moe_family{"glm4moe", &configure,
                                               &load_network<MixtureDecoder>};

}  // namespace cadenza::model::arch
