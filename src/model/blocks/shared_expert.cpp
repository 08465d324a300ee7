#include "model/blocks/shared_expert.h"

namespace cadenza::model::blocks {

using kernels::Matrix;

SharedExpert::SharedExpert(const ModelConfig& config)
    : c_(config), ffn_(config, config.n_ff_shared_expert, "_shexp") {}

Status SharedExpert::load(WeightLoader& loader, int64_t layer, Weights& w) const {
  if (Status st = ffn_.load(loader, layer, w.ffn); !st) return st;
  return loader.load({{w.gate_inp, layer_tensor(layer, "ffn_gate_inp_shexp.weight"), {c_.n_embd}}});
}

Status SharedExpert::reserve(kernels::Backend& backend, const StepCapacity& capacity) {
  if (Status st = ffn_.reserve(backend, capacity); !st) return st;
  if (Status st = ffn_out_.reserve(backend, capacity.max_tokens, c_.n_embd); !st) return st;
  return gate_.reserve(backend, capacity.max_tokens, 1);
}

void SharedExpert::forward(const ForwardContext& ctx, const Weights& w, Matrix h, Matrix out) {
  kernels::Backend& be = ctx.backend;
  const int64_t n = ctx.inputs.n_tokens;
  const Matrix s = ffn_out_.rows(n), g = gate_.rows(n);
  ffn_.forward(ctx, w.ffn, h, s);     // [n][d]
  be.matmul(*w.gate_inp, h, g);       // [n][1]
  be.sigmoid(g, g);
  be.weighted_sum_slots(s, g, out);   // [n][d]
}

}  // namespace cadenza::model::blocks
