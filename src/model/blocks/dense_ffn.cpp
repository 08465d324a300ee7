#include "model/blocks/dense_ffn.h"

#include "gguf/gguf.h"

namespace cadenza::model::blocks {

using kernels::Matrix;

DenseFfn::DenseFfn(const ModelConfig& config, int64_t width, std::string_view suffix)
    : c_(config), width_(width), columns_(config.shard.columns(width)), suffix_(suffix) {}

Status DenseFfn::load(WeightLoader& loader, int64_t layer, Weights& w) const {
  const int64_t d = c_.n_embd, f = width_;
  const bool split = c_.shard.tensor_parallel();
  const Slice rows = split ? rows_of(columns_) : Slice{};
  const Slice cols = split ? columns_of(columns_) : Slice{};
  auto name = [&](const char* what) { return layer_tensor(layer, what + suffix_ + ".weight"); };
  if (fused()) {
    if (split) {
      return make_error("{}: tensor parallelism does not split the fused '{}' yet",
                        loader.file().name(), name("ffn_up"));
    }
    return loader.load({
        {w.up, name("ffn_up"), {d, 2 * f}},
        {w.down, name("ffn_down"), {f, d}},
    });
  }
  return loader.load({
      {w.gate, name("ffn_gate"), {d, f}, Load::Required, rows},
      {w.up, name("ffn_up"), {d, f}, Load::Required, rows},
      {w.down, name("ffn_down"), {f, d}, Load::Required, cols},
  });
}

Status DenseFfn::reserve(kernels::Backend& backend, const StepCapacity& capacity) {
  if (Status st = gate_.reserve(backend, capacity.max_tokens, columns_.count); !st) return st;
  return up_.reserve(backend, capacity.max_tokens, fused() ? 2 * width_ : columns_.count);
}

void DenseFfn::forward(const ForwardContext& ctx, const Weights& w, Matrix h, Matrix out) {
  kernels::Backend& be = ctx.backend;
  const int64_t n = ctx.inputs.n_tokens;
  const Matrix gate = gate_.rows(n);
  Matrix gate_in = gate, up = up_.rows(n);
  if (fused()) {  // [n][2f]: the gate's columns, then the up columns
    be.matmul(*w.up, h, up);
    gate_in = Matrix{up.data, n, width_, up.stride};
    up = Matrix{up.data + width_, n, width_, up.stride};
  } else {
    be.matmul(*w.gate, h, gate);  // [n][f]
    be.matmul(*w.up, h, up);      // [n][f]
  }
  if (c_.ffn_activation == ModelConfig::FfnActivation::GeluTanh) {
    be.geglu(gate_in, up, gate);
  } else {
    be.swiglu(gate_in, up, gate);
  }
  be.matmul(*w.down, gate, out);  // [n][d]; under tensor parallelism this rank's share
  tp_all_reduce(ctx, out);
}

}  // namespace cadenza::model::blocks
