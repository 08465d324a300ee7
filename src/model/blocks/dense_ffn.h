// Dense FFN block: a SwiGLU (or GeGLU) feed-forward network.
//
//   gate, up = h Wgate, h Wup        [n][f]    (config.fused_gate_up: h Wup [n][2f], gate first)
//   out      = (silu(gate) * up) Wdown   [n][d]  (config.ffn_activation GeluTanh: gelu(gate))
//
// Shapes: n = tokens of the step, d = n_embd, f = the width given at construction (n_ff for a
// layer's FFN, n_ff_shared_expert for qwen2moe's shared expert).
// Tensors, per layer: `blk.N.ffn_{gate,up,down}<suffix>.weight` ([f][d], [f][d], [d][f]); the
// suffix is "" for the layer's FFN and "_shexp" for the shared expert (shared_expert.h). Fused
// (phi3; the layer's FFN only): `blk.N.ffn_up.weight` [2f][d] and `ffn_down`, no ffn_gate.
//
// Tensor parallel (config.shard): this rank holds columns [c0, c0 + f/tp) of the FFN (rows of
// Wgate/Wup, columns of Wdown) and all-reduces the partial output.
//
// One object per model (shape, scratch); one Weights per layer. Not thread-safe (scratch).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kernels/backend.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/scratch.h"
#include "model/weight_loader.h"

namespace cadenza::model::blocks {

class DenseFfn {
 public:
  struct Weights {
    std::unique_ptr<kernels::Weight> gate, up, down;
  };

  // `config` must outlive the block.
  DenseFfn(const ModelConfig& config, int64_t width, std::string_view suffix = "");

  Status load(WeightLoader& loader, int64_t layer, Weights& w) const;
  Status reserve(kernels::Backend& backend, const StepCapacity& capacity);

  // h: [n][d]; out: [n][d], may be h.
  void forward(const ForwardContext& ctx, const Weights& w, kernels::Matrix h, kernels::Matrix out);

 private:
  const ModelConfig& c_;
  int64_t width_;
  dist::Range columns_;  // this rank's FFN columns (all of them in one process)
  std::string suffix_;
  bool fused() const { return c_.fused_gate_up && suffix_.empty(); }

  ScratchMatrix gate_, up_;  // [n][this rank's f]; up_ [n][2f] when fused
};

}  // namespace cadenza::model::blocks
