// gemma3: Google Gemma 3 text models (general.architecture "gemma3"; 1B, and the language model
// of 4B / 12B / 27B). Per layer, a norm before AND after each block:
//
//   x = token_embd[tokens] * sqrt(n_embd)
//   for each layer:
//     x = x + rms_norm(Attention(rms_norm(x) * attn_norm)) * post_attention_norm
//     x = x + rms_norm(GeGLU(rms_norm(x) * ffn_norm)) * post_ffw_norm
//   logits = OutputHead(x[logit rows])  (tied to token_embd; soft-capped when the file says so)
//
//  - Attention: GQA, per-head Q/K RMS norm (`attn_{q,k}_norm`) before NeoX RoPE; a sliding
//    window (`attention.sliding_window`) on every layer but each P-th (P =
//    `attention.sliding_window_pattern`, default 6: layers 5, 11, ... are global, Gemma 3's
//    published 5:1 pattern); the windowed layers rotate with base `rope.freq_base_swa` (default
//    10000, HF rope_local_base_freq) unscaled, the global ones with `rope.freq_base` and the
//    file's scaling (4B+: linear x8).
//  - The softmax scale is 1/sqrt(query_pre_attn_scalar). GGUF has no key for it: it is the head
//    dim in every Gemma 3 but 27B, whose 168 is n_embd / n_heads (HF configs); 27B is recognised
//    by its shape (62 layers, n_embd 5376). `attention.scale`, when a file has it, wins.
//  - The norms: GGUF stores Gemma's (1 + w) already added (the converter adds 1), so they are
//    plain RMS norms of the stored weights.
//  - FFN: GeGLU with the tanh GELU (HF hidden_activation gelu_pytorch_tanh).
//  - `final_logit_softcapping` (when present): logits = cap tanh(logits / cap). Gemma 3 has no
//    attention soft-capping; a file with `attn_logit_softcapping` is refused.
// Under the engine the windowed layers keep only their window's KV (a window block group:
// model::KvCacheOptions::num_window_blocks, src/kv/README.md).
#include <cmath>
#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "model/blocks/attention.h"
#include "model/blocks/dense_ffn.h"
#include "model/blocks/embedding.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

using kernels::Matrix;

Status configure(const MetadataReader& md, ModelConfig& c) {
  const std::string& file = md.file().name();
  c.rope_layout = kernels::RopeLayout::NeoX;
  c.qk_norm = true;
  c.ffn_activation = ModelConfig::FfnActivation::GeluTanh;
  c.embedding_scale = std::sqrt(static_cast<float>(c.n_embd));

  Result<int64_t> v = md.count("attention.sliding_window", 1, limits::kMaxContext);
  if (!v) return v.error_value();
  c.attn_window = *v;
  if (v = md.count_or("attention.sliding_window_pattern", 6, 1, limits::kMaxLayers); !v) {
    return v.error_value();
  }
  const int64_t period = *v;
  c.attn_window_layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t il = 0; il < c.n_layers; ++il) {
    c.attn_window_layers[static_cast<size_t>(il)] = il % period < period - 1;
  }
  Result<double> base = md.real_or("rope.freq_base_swa", 10000.0);
  if (!base) return base.error_value();
  if (!(*base > 1.0)) {
    return make_error("{}: key '{}' = {} must be > 1", file, md.key("rope.freq_base_swa"), *base);
  }
  c.rope_freq_base_window = static_cast<float>(*base);
  c.rope_window_unscaled = true;

  if (md.has("attention.scale")) {
    Result<double> s = md.real_or("attention.scale", 0.0);
    if (!s) return s.error_value();
    if (!(*s > 0)) {
      return make_error("{}: key '{}' = {} must be positive", file, md.key("attention.scale"), *s);
    }
    c.attn_scale = static_cast<float>(*s);
  } else if (c.n_layers == 62 && c.n_embd == 5376) {  // Gemma 3 27B: query_pre_attn_scalar 168
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_heads));
  }
  if (md.has("attn_logit_softcapping")) {
    return make_error("{}: key '{}' (attention soft-capping, Gemma 2) is not supported", file,
                      md.key("attn_logit_softcapping"));
  }
  if (md.has("final_logit_softcapping")) {
    Result<double> cap = md.real_or("final_logit_softcapping", 0.0);
    if (!cap) return cap.error_value();
    if (*cap < 0) {
      return make_error("{}: key '{}' = {} must not be negative", file,
                        md.key("final_logit_softcapping"), *cap);
    }
    c.final_logit_softcap = static_cast<float>(*cap);
  }
  return read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::None});
}

class Gemma3 final : public Network {
 public:
  explicit Gemma3(const ModelConfig& c)
      : c_(c), embedding_(c), attention_(c), ffn_(c, c.n_ff), head_(c) {}

  Status load(WeightLoader& loader) {
    Status st = embedding_.load(loader);
    if (st) st = head_.load(loader);
    if (st) st = attention_.load_rope(loader);
    layers_.resize(static_cast<size_t>(c_.n_layers));
    const int64_t d = c_.n_embd;
    for (int64_t il = c_.shard.layer_begin; st && il < c_.shard.layer_end; ++il) {
      Layer& L = layers_[static_cast<size_t>(il)];
      st = loader.load({{L.attn_norm, layer_tensor(il, "attn_norm.weight"), {d}},
                        {L.attn_post_norm, layer_tensor(il, "post_attention_norm.weight"), {d}},
                        {L.ffn_norm, layer_tensor(il, "ffn_norm.weight"), {d}},
                        {L.ffn_post_norm, layer_tensor(il, "post_ffw_norm.weight"), {d}}});
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
    const float eps = c_.rms_norm_eps;
    blocks::stage_input(ctx, c_, embedding_, x);
    for (int64_t il = c_.shard.layer_begin; il < c_.shard.layer_end; ++il) {
      const Layer& L = layers_[static_cast<size_t>(il)];
      be.rms_norm(x, *L.attn_norm, eps, h);
      attention_.forward(ctx, il, L.attention, h, h);
      be.rms_norm(h, *L.attn_post_norm, eps, h);
      be.add(x, h, x);
      be.rms_norm(x, *L.ffn_norm, eps, h);
      ffn_.forward(ctx, L.ffn, h, h);
      be.rms_norm(h, *L.ffn_post_norm, eps, h);
      be.add(x, h, x);
    }
    blocks::stage_output(ctx, c_, head_, embedding_, x);
  }

 private:
  struct Layer {
    std::unique_ptr<kernels::Weight> attn_norm, attn_post_norm;  // [d]
    std::unique_ptr<kernels::Weight> ffn_norm, ffn_post_norm;    // [d]
    blocks::Attention::Weights attention;
    blocks::DenseFfn::Weights ffn;
  };

  const ModelConfig& c_;
  blocks::TokenEmbedding embedding_;
  blocks::Attention attention_;
  blocks::DenseFfn ffn_;
  blocks::OutputHead head_;
  std::vector<Layer> layers_;
  ScratchMatrix x_, h_;
};

}  // namespace

extern const ArchitectureFamily gemma3_family{"gemma3", &configure, &load_network<Gemma3>};

}  // namespace cadenza::model::arch
