// deepseek2: DeepSeek-V2 / V2.5 / V3 / V3.1 / R1 and Kimi-K2 (general.architecture "deepseek2").
// Multi-head latent attention over the compressed KV cache (blocks/latent_attention.h); the first
// `leading_dense_block_count` layers have a dense FFN, the rest routed experts (softmax or
// sigmoid gating, the selection bias, expert groups, the routed scaling factor) plus
// `expert_shared_count` ungated shared experts, one SwiGLU FFN of that many expert widths.
//
//   x = token_embd[tokens]
//   for each layer:
//     x = x + LatentAttention(rms_norm(x) * attn_norm)
//     h = rms_norm(x) * ffn_norm
//     x = x + DenseFfn(h)                                   (leading dense layers)
//     x = x + SharedExperts(h) + RoutedExperts(h)           (the others, added in this order)
//   logits = OutputHead(x[logit rows])
//
// Files: the MLA layout of current converters (head_count_kv 1, key_length = kv_lora_rank +
// rope dims, value_length = kv_lora_rank, key_length_mla / value_length_mla the per-head sizes,
// attn_k_b / attn_v_b). Older files with one attn_kv_b per layer are refused with a hint.
// Multi-token-prediction layers (`nextn_predict_layers`) are not run: they are left out of the
// layer count and the load log says so.
#include <memory>
#include <vector>

#include <spdlog/spdlog.h>

#include "gguf/gguf.h"
#include "model/blocks/embedding.h"
#include "model/blocks/latent_attention.h"
#include "model/blocks/mixture_ffn.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

using kernels::Matrix;

Status configure(const MetadataReader& md, ModelConfig& c) {
  const std::string& file = md.file().name();
  c.rope_layout = kernels::RopeLayout::Normal;
  c.kv_values_in_keys = true;
  if (!md.has("attention.key_length_mla") || !md.has("attention.value_length_mla") ||
      md.file().find_tensor("blk.0.attn_kv_b.weight") != nullptr) {
    return make_error("{}: a deepseek2 file without '{}' / '{}' (one attn_kv_b per layer) is the "
                      "older layout; convert the model again with a current converter (it writes "
                      "attn_k_b and attn_v_b for the compressed cache)",
                      file, md.key("attention.key_length_mla"), md.key("attention.value_length_mla"));
  }
  ModelConfig::LatentAttentionShape& m = c.mla;
  Result<int64_t> v = md.count_or("attention.q_lora_rank", 0, 0, limits::kMaxEmbd);
  if (!v) return v.error_value();
  m.q_rank = *v;
  if (v = md.count("attention.kv_lora_rank", 1, limits::kMaxEmbd); !v) return v.error_value();
  m.kv_rank = *v;
  if (v = md.count("rope.dimension_count", 2, limits::kMaxHeadDim); !v) return v.error_value();
  m.rope = *v;
  if (v = md.count("attention.key_length_mla", m.rope + 1, limits::kMaxHeadDim); !v) {
    return v.error_value();
  }
  m.nope = *v - m.rope;
  if (v = md.count("attention.value_length_mla", 1, limits::kMaxHeadDim); !v) return v.error_value();
  m.v = *v;
  // The compressed cache is one shared "KV head" of (latent | RoPE key).
  if (c.n_kv_heads != 1 || c.head_dim_k != m.kv_rank + m.rope || c.head_dim_v != m.kv_rank) {
    return make_error("{}: inconsistent MLA ranks: '{}' = {}, '{}' = {}, '{}' = {} (expected 1, "
                      "kv_lora_rank {} + rope dims {}, kv_lora_rank)",
                      file, md.key("attention.head_count_kv"), c.n_kv_heads,
                      md.key("attention.key_length"), c.head_dim_k,
                      md.key("attention.value_length"), c.head_dim_v, m.kv_rank, m.rope);
  }

  // Multi-token prediction layers follow the trunk's layers; they are not run.
  if (v = md.count_or("nextn_predict_layers", 0, 0, c.n_layers - 1); !v) return v.error_value();
  if (*v > 0) {
    spdlog::info("{}: skipping {} multi-token-prediction layer(s) (blk.{}..{}); only the {} "
                 "decoder layers run", file, *v, c.n_layers - *v, c.n_layers - 1, c.n_layers - *v);
    c.n_layers -= *v;
  }

  Status st = read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::Optional,
                                        .normalize_top_k = false});
  if (!st) return st;
  if (v = md.count_or("leading_dense_block_count", c.n_experts > 0 ? 0 : c.n_layers, 0, c.n_layers);
      !v) {
    return v.error_value();
  }
  c.n_leading_dense = c.n_experts > 0 ? *v : c.n_layers;
  if (c.n_experts > 0) {
    if (v = md.count_or("expert_shared_count", 0, 0, limits::kMaxExperts); !v) return v.error_value();
    c.n_ff_shared_expert = *v * c.n_ff_expert;
  }
  return {};
}

class DeepSeek2 final : public Network {
 public:
  explicit DeepSeek2(const ModelConfig& c)
      : c_(c), embedding_(c), attention_(c), ffn_(c), head_(c) {}

  Status load(WeightLoader& loader) {
    Status st = embedding_.load(loader);
    if (st) st = head_.load(loader);
    layers_.resize(static_cast<size_t>(c_.n_layers));
    for (int64_t il = c_.shard.layer_begin; st && il < c_.shard.layer_end; ++il) {
      Layer& L = layers_[static_cast<size_t>(il)];
      st = loader.load({{L.attn_norm, layer_tensor(il, "attn_norm.weight"), {c_.n_embd}},
                        {L.ffn_norm, layer_tensor(il, "ffn_norm.weight"), {c_.n_embd}}});
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
    std::unique_ptr<kernels::Weight> attn_norm, ffn_norm;  // [d]
    blocks::LatentAttention::Weights attention;
    blocks::MixtureFfn::Weights ffn;
  };

  const ModelConfig& c_;
  blocks::TokenEmbedding embedding_;
  blocks::LatentAttention attention_;
  blocks::MixtureFfn ffn_;
  blocks::OutputHead head_;
  std::vector<Layer> layers_;
  ScratchMatrix x_, h_;
};

}  // namespace

extern const ArchitectureFamily deepseek2_family{"deepseek2", &configure,
                                                 &load_network<DeepSeek2>};

}  // namespace cadenza::model::arch
