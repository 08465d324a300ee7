// qwen2moe: Qwen1.5-MoE, Qwen2-57B-A14B. Qwen2 attention (q/k/v biases, NeoX RoPE); every layer's
// FFN is routed experts whose top-k weights are not renormalised (HF norm_topk_prob false) plus a
// shared expert that every token runs, gated by a sigmoid.
//
//   x = token_embd[tokens]
//   for each layer:
//     x = x + Attention(rms_norm(x) * attn_norm)
//     h = rms_norm(x) * ffn_norm
//     x = x + SharedExpert(h) + RoutedExperts(h)     (added in this order)
//   logits = OutputHead(x[logit rows])
//
// The blocks and their shapes: src/model/blocks/*.h.
#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "model/blocks/attention.h"
#include "model/blocks/embedding.h"
#include "model/blocks/routed_experts.h"
#include "model/blocks/shared_expert.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

using kernels::Matrix;

Status configure(const MetadataReader& md, ModelConfig& c) {
  c.rope_layout = kernels::RopeLayout::NeoX;
  c.qkv_bias = true;
  Status st = read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::Required,
                                        .normalize_top_k = false});
  if (!st) return st;
  // The shared expert's width (0: none); files without the key but with the tensors give it by
  // the tensor shape (older conversions wrote only feed_forward_length).
  int64_t from_tensor = 0;
  if (const gguf::TensorInfo* t = md.file().find_tensor("blk.0.ffn_gate_shexp.weight");
      t != nullptr && t->shape.size() == 2) {
    from_tensor = t->shape[1];
  }
  Result<int64_t> width =
      md.count_or("expert_shared_feed_forward_length", from_tensor, 0, limits::kMaxFf);
  if (!width) return width.error_value();
  c.n_ff_shared_expert = *width;
  return {};
}

class Qwen2Moe final : public Network {
 public:
  explicit Qwen2Moe(const ModelConfig& c)
      : c_(c), embedding_(c), attention_(c), experts_(c), shared_(c), head_(c) {}

  Status load(WeightLoader& loader) {
    Status st = embedding_.load(loader);
    if (st) st = head_.load(loader);
    if (st) st = attention_.load_rope(loader);
    layers_.resize(static_cast<size_t>(c_.n_layers));
    for (int64_t il = c_.shard.layer_begin; st && il < c_.shard.layer_end; ++il) {
      Layer& L = layers_[static_cast<size_t>(il)];
      st = loader.load({{L.attn_norm, layer_tensor(il, "attn_norm.weight"), {c_.n_embd}},
                        {L.ffn_norm, layer_tensor(il, "ffn_norm.weight"), {c_.n_embd}}});
      if (st) st = attention_.load(loader, il, L.attention);
      if (st) st = experts_.load(loader, il, L.experts);
      if (st && has_shared()) st = shared_.load(loader, il, L.shared);
    }
    return st;
  }

  Status reserve(kernels::Backend& be, const StepCapacity& cap) override {
    Status st = x_.reserve(be, cap.max_tokens, c_.n_embd);
    if (st) st = h_.reserve(be, cap.max_tokens, c_.n_embd);
    if (st) st = attention_.reserve(be, cap);
    if (st) st = experts_.reserve(be, cap);
    if (st && has_shared()) st = shared_.reserve(be, cap);
    if (st && has_shared()) st = shared_out_.reserve(be, cap.max_tokens, c_.n_embd);
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
      // The shared expert reads h before the routed experts overwrite it.
      const Matrix shared = has_shared() ? shared_out_.rows(n) : Matrix{};
      if (has_shared()) shared_.forward(ctx, L.shared, h, shared);
      experts_.forward(ctx, il, L.experts, h, h);
      if (has_shared()) be.add(x, shared, x);
      be.add(x, h, x);
    }
    blocks::stage_output(ctx, c_, head_, embedding_, x);
  }

 private:
  struct Layer {
    std::unique_ptr<kernels::Weight> attn_norm, ffn_norm;  // [d]
    blocks::Attention::Weights attention;
    blocks::RoutedExperts::Weights experts;
    blocks::SharedExpert::Weights shared;  // when n_ff_shared_expert > 0
  };
  bool has_shared() const { return c_.n_ff_shared_expert > 0; }

  const ModelConfig& c_;
  blocks::TokenEmbedding embedding_;
  blocks::Attention attention_;
  blocks::RoutedExperts experts_;
  blocks::SharedExpert shared_;
  blocks::OutputHead head_;
  std::vector<Layer> layers_;
  ScratchMatrix x_, h_;
  ScratchMatrix shared_out_;  // [n][d] the shared expert's output, added after the routed sum
};

}  // namespace

extern const ArchitectureFamily qwen2moe_family{"qwen2moe", &configure, &load_network<Qwen2Moe>};

}  // namespace cadenza::model::arch
