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
// log says so. The blocks and their shapes: src/model/blocks/*.h.
#include <memory>
#include <vector>

#include <spdlog/spdlog.h>

#include "gguf/gguf.h"
#include "model/blocks/attention.h"
#include "model/blocks/embedding.h"
#include "model/blocks/mixture_ffn.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

using kernels::Matrix;

Status configure(const MetadataReader& md, ModelConfig& c) {
  const std::string& file = md.file().name();
  c.rope_layout = kernels::RopeLayout::NeoX;
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

class Glm4Moe final : public Network {
 public:
  explicit Glm4Moe(const ModelConfig& c)
      : c_(c), embedding_(c), attention_(c), ffn_(c), head_(c) {}

  Status load(WeightLoader& loader) {
    Status st = embedding_.load(loader);
    if (st) st = head_.load(loader);
    if (st) st = attention_.load_rope(loader);
    layers_.resize(static_cast<size_t>(c_.n_layers));
    for (int64_t il = c_.shard.layer_begin; st && il < c_.shard.layer_end; ++il) {
      Layer& L = layers_[static_cast<size_t>(il)];
      st = loader.load({{L.attn_norm, layer_tensor(il, "attn_norm.weight"), {c_.n_embd}},
                        {L.ffn_norm, layer_tensor(il, "post_attention_norm.weight"), {c_.n_embd}}});
      if (st) st = attention_.load(loader, il, L.attention);
      if (st) st = ffn_.load(loader, il, L.ffn);
    }
    return st;
  }

  Status reserve(kernels::Backend& be, const StepCapacity& cap) override {
    Status st = x_.reserve(be, cap.max_tokens, c_.n_embd);
    if (st) st = h_.reserve(be, cap.max_tokens, c_.n_embd);
    if (st) st = attention_.reserve(be, cap);
    if (st) st = ffn_.reserve(be, cap);
    if (st) st = head_.reserve(be, cap);
    return st;
  }

  void forward(const ForwardContext& ctx) override {
    kernels::Backend& be = ctx.backend;
    const int64_t n = ctx.inputs.n_tokens;
    const Matrix x = x_.rows(n);  // [n][d] the residual stream
    const Matrix h = h_.rows(n);  // [n][d] a block's input, then its output
    blocks::stage_input(ctx, c_, embedding_, x);
    for (int64_t il = c_.shard.layer_begin; il < c_.shard.layer_end; ++il) {
      const Layer& L = layers_[static_cast<size_t>(il)];
      be.rms_norm(x, *L.attn_norm, c_.rms_norm_eps, h);
      attention_.forward(ctx, il, L.attention, h, h);
      be.add(x, h, x);
      be.rms_norm(x, *L.ffn_norm, c_.rms_norm_eps, h);
      ffn_.forward(ctx, il, L.ffn, h, x);
    }
    blocks::stage_output(ctx, c_, head_, embedding_, x);
  }

 private:
  struct Layer {
    std::unique_ptr<kernels::Weight> attn_norm, ffn_norm;  // [d]; ffn_norm: post_attention_norm
    blocks::Attention::Weights attention;
    blocks::MixtureFfn::Weights ffn;
  };

  const ModelConfig& c_;
  blocks::TokenEmbedding embedding_;
  blocks::Attention attention_;
  blocks::MixtureFfn ffn_;
  blocks::OutputHead head_;
  std::vector<Layer> layers_;
  ScratchMatrix x_, h_;
};

}  // namespace

extern const ArchitectureFamily glm4moe_family{"glm4moe", &configure, &load_network<Glm4Moe>};

}  // namespace cadenza::model::arch
