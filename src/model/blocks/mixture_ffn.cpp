#include "model/blocks/mixture_ffn.h"

namespace cadenza::model::blocks {

using kernels::Matrix;

MixtureFfn::MixtureFfn(const ModelConfig& config)
    : c_(config), dense_(config, config.n_ff), experts_(config),
      shared_(config, config.n_ff_shared_expert, "_shexp") {}

Status MixtureFfn::load(WeightLoader& loader, int64_t layer, Weights& w) const {
  if (dense_layer(layer)) return dense_.load(loader, layer, w.dense);
  Status st = experts_.load(loader, layer, w.experts);
  if (st && has_shared()) st = shared_.load(loader, layer, w.shared);
  return st;
}

Status MixtureFfn::reserve(kernels::Backend& be, const StepCapacity& cap) {
  Status st;
  bool any_dense = false, any_experts = false;
  for (int64_t il = 0; il < c_.n_layers; ++il) (dense_layer(il) ? any_dense : any_experts) = true;
  if (any_dense) st = dense_.reserve(be, cap);
  if (st && c_.n_experts > 0 && any_experts) st = experts_.reserve(be, cap);
  if (st && has_shared()) st = shared_.reserve(be, cap);
  if (st && has_shared()) st = shared_out_.reserve(be, cap.max_tokens, c_.n_embd);
  return st;
}

void MixtureFfn::forward(const ForwardContext& ctx, int64_t layer, const Weights& w, Matrix h,
                         Matrix x) {
  kernels::Backend& be = ctx.backend;
  if (dense_layer(layer)) {
    dense_.forward(ctx, w.dense, h, h);
  } else {
    // The shared experts read h before the routed experts overwrite it.
    const Matrix shared = has_shared() ? shared_out_.rows(ctx.inputs.n_tokens) : Matrix{};
    if (has_shared()) shared_.forward(ctx, w.shared, h, shared);
    experts_.forward(ctx, layer, w.experts, h, h);
    if (has_shared()) {
      if (c_.residual_scale != 1.0f) be.scale(shared, c_.residual_scale, shared);
      be.add(x, shared, x);
    }
  }
  if (c_.residual_scale != 1.0f) be.scale(h, c_.residual_scale, h);
  be.add(x, h, x);
}

}  // namespace cadenza::model::blocks
