// gpt-oss: OpenAI gpt-oss-20b / gpt-oss-120b (general.architecture "gpt-oss"). Pre-norm decoder
// with a mixture of experts in every layer:
//  - attention: GQA with q/k/v/output biases, NeoX RoPE with YaRN (from the rope.scaling.* keys;
//    gpt-oss: factor 32 from 4096), a learned sink logit per head in the softmax denominator
//    (`attn_sinks`), and a sliding window (`attention.sliding_window`, 128) on alternating layers:
//    layer il is windowed when il % P < P - 1, P = `attention.sliding_window_pattern` (default 2:
//    the even layers, as the HF config's layer_types "sliding_attention", "full_attention", ...);
//  - experts: a router with a bias, the top-k chosen by their logits and weighted by a softmax over
//    those k (`expert_gating_func` 3, the default here, as no converter writes the key), expert
//    gate/up/down biases, and the clamped SwiGLU (Backend::swiglu_clamped) with gpt-oss's alpha
//    1.702 and limit 7 (GGUF has no key for them; the values are the model's: HF config
//    swiglu_limit, alpha in the HF modeling code).
//
//   x = token_embd[tokens]
//   for each layer:
//     x = x + Attention(rms_norm(x) * attn_norm)               (sinks; window on some layers)
//     x = x + RoutedExperts(rms_norm(x) * post_attention_norm)  (biases, clamped SwiGLU)
//   logits = OutputHead(x[logit rows])
//
// Under the engine the windowed layers keep only their window's KV (a window block group:
// model::KvCacheOptions::num_window_blocks, src/kv/README.md).
#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "model/blocks/attention.h"
#include "model/blocks/embedding.h"
#include "model/blocks/routed_experts.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

using kernels::Matrix;

constexpr float kSwigluAlpha = 1.702f;
constexpr float kSwigluLimit = 7.0f;

Status configure(const MetadataReader& md, ModelConfig& c) {
  const std::string& file = md.file().name();
  c.rope_layout = kernels::RopeLayout::NeoX;
  c.qkv_bias = true;
  c.output_bias = true;
  c.attn_sinks = true;
  Result<int64_t> v = md.count("attention.sliding_window", 1, limits::kMaxContext);
  if (!v) return v.error_value();
  c.attn_window = *v;
  if (v = md.count_or("attention.sliding_window_pattern", 2, 1, limits::kMaxLayers); !v) {
    return v.error_value();
  }
  const int64_t period = *v;
  c.attn_window_layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t il = 0; il < c.n_layers; ++il) {
    c.attn_window_layers[static_cast<size_t>(il)] = il % period < period - 1;
  }
  if (md.has("rope.freq_base_swa")) {
    Result<double> base = md.real_or("rope.freq_base_swa", 0.0);
    if (!base) return base.error_value();
    Result<double> full = md.real_or("rope.freq_base", 10000.0);
    if (!full) return full.error_value();
    if (*base != *full) {
      return make_error("{}: key '{}' = {} (a RoPE base of its own for the windowed layers) is "
                        "not supported", file, md.key("rope.freq_base_swa"), *base);
    }
  }
  Status st = read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::Required,
                                        .normalize_top_k = false,
                                        .gating_func = 3});
  if (!st) return st;
  c.moe_expert_bias = true;
  c.moe_swiglu_alpha = kSwigluAlpha;
  c.moe_swiglu_limit = kSwigluLimit;
  return {};
}

class GptOss final : public Network {
 public:
  explicit GptOss(const ModelConfig& c)
      : c_(c), embedding_(c), attention_(c), experts_(c), head_(c) {}

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
      if (st) st = experts_.load(loader, il, L.experts);
    }
    return st;
  }

  Status reserve(kernels::Backend& be, const StepCapacity& cap) override {
    Status st = x_.reserve(be, cap.max_tokens, c_.n_embd);
    if (st) st = h_.reserve(be, cap.max_tokens, c_.n_embd);
    if (st) st = attention_.reserve(be, cap);
    if (st) st = experts_.reserve(be, cap);
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
      experts_.forward(ctx, il, L.experts, h, h);
      be.add(x, h, x);
    }
    blocks::stage_output(ctx, c_, head_, embedding_, x);
  }

 private:
  struct Layer {
    std::unique_ptr<kernels::Weight> attn_norm, ffn_norm;  // [d]; ffn_norm: post_attention_norm
    blocks::Attention::Weights attention;
    blocks::RoutedExperts::Weights experts;
  };

  const ModelConfig& c_;
  blocks::TokenEmbedding embedding_;
  blocks::Attention attention_;
  blocks::RoutedExperts experts_;
  blocks::OutputHead head_;
  std::vector<Layer> layers_;
  ScratchMatrix x_, h_;
};

}  // namespace

extern const ArchitectureFamily gpt_oss_family{"gpt-oss", &configure, &load_network<GptOss>};

}  // namespace cadenza::model::arch
