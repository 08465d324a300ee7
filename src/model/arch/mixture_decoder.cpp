// MixtureDecoder (mixture_decoder.h): the network of glm4moe and llama4. Not a family: it
// registers nothing.
#include "model/arch/mixture_decoder.h"

#include "model/weight_loader.h"

namespace cadenza::model::arch {

using kernels::Matrix;

MixtureDecoder::MixtureDecoder(const ModelConfig& c)
    : c_(c), embedding_(c), attention_(c), ffn_(c), head_(c) {}

Status MixtureDecoder::load(WeightLoader& loader) {
  Status st = embedding_.load(loader);
  if (st) st = head_.load(loader);
  if (st) st = attention_.load_rope(loader);
  layers_.resize(static_cast<size_t>(c_.n_layers));
  for (int64_t il = c_.shard.layer_begin; st && il < c_.shard.layer_end; ++il) {
    Layer& L = layers_[static_cast<size_t>(il)];
    st = loader.load({{L.attn_norm, layer_tensor(il, "attn_norm.weight"), {c_.n_embd}},
                      {L.ffn_norm, layer_tensor(il, c_.ffn_norm_tensor), {c_.n_embd}}});
    if (st) st = attention_.load(loader, il, L.attention);
    if (st) st = ffn_.load(loader, il, L.ffn);
  }
  return st;
}

Status MixtureDecoder::reserve(kernels::Backend& be, const StepCapacity& cap) {
  Status st = x_.reserve(be, cap.max_tokens, c_.n_embd);
  if (st) st = h_.reserve(be, cap.max_tokens, c_.n_embd);
  if (st) st = attention_.reserve(be, cap);
  if (st) st = ffn_.reserve(be, cap);
  if (st) st = head_.reserve(be, cap);
  return st;
}

void MixtureDecoder::forward(const ForwardContext& ctx) {
  kernels::Backend& be = ctx.backend;
  const int64_t n = ctx.inputs.n_tokens;
  const Matrix x = x_.rows(n);
  const Matrix h = h_.rows(n);
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

}  // namespace cadenza::model::arch
