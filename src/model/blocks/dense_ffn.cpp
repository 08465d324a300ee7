#include "model/blocks/dense_ffn.h"

namespace cadenza::model::blocks {

using kernels::Matrix;

DenseFfn::DenseFfn(const ModelConfig& config, int64_t width, std::string_view suffix)
    : c_(config), width_(width), suffix_(suffix) {}

Status DenseFfn::load(WeightLoader& loader, int64_t layer, Weights& w) const {
  const int64_t d = c_.n_embd, f = width_;
  auto name = [&](const char* what) { return layer_tensor(layer, what + suffix_ + ".weight"); };
  return loader.load({
      {w.gate, name("ffn_gate"), {d, f}},
      {w.up, name("ffn_up"), {d, f}},
      {w.down, name("ffn_down"), {f, d}},
  });
}

Status DenseFfn::reserve(kernels::Backend& backend, const StepCapacity& capacity) {
  if (Status st = gate_.reserve(backend, capacity.max_tokens, width_); !st) return st;
  return up_.reserve(backend, capacity.max_tokens, width_);
}

void DenseFfn::forward(const ForwardContext& ctx, const Weights& w, Matrix h, Matrix out) {
  kernels::Backend& be = ctx.backend;
  const int64_t n = ctx.inputs.n_tokens;
  const Matrix gate = gate_.rows(n), up = up_.rows(n);
  be.matmul(*w.gate, h, gate);  // [n][f]
  be.matmul(*w.up, h, up);      // [n][f]
  be.swiglu(gate, up, gate);
  be.matmul(*w.down, gate, out);  // [n][d]
}

}  // namespace cadenza::model::blocks
