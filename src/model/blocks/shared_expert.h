// Shared-expert block (qwen2moe): a dense SwiGLU FFN that every token runs beside the routed
// experts, scaled per token by a sigmoid gate.
//
//   s   = DenseFfn "_shexp" of width fs (dense_ffn.h)   [n][d]
//   g   = sigmoid(h . w_gate_inp_shexp)                 [n][1]
//   out = g * s                                         [n][d]
//
// Shapes: n = tokens of the step, d = n_embd, fs = n_ff_shared_expert.
// Tensors, per layer: `blk.N.ffn_{gate,up,down}_shexp.weight` ([fs][d], [fs][d], [d][fs]) and
// `blk.N.ffn_gate_inp_shexp.weight` [d].
//
// One object per model (shape, scratch); one Weights per layer. Not thread-safe (scratch).
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/backend.h"
#include "model/blocks/dense_ffn.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/scratch.h"
#include "model/weight_loader.h"

namespace cadenza::model::blocks {

class SharedExpert {
 public:
  struct Weights {
    DenseFfn::Weights ffn;
    std::unique_ptr<kernels::Weight> gate_inp;  // [1][d]
  };

  // `config` must outlive the block.
  explicit SharedExpert(const ModelConfig& config);

  Status load(WeightLoader& loader, int64_t layer, Weights& w) const;
  Status reserve(kernels::Backend& backend, const StepCapacity& capacity);

  // h: [n][d]; out: [n][d], must not be h (the routed experts still read h afterwards).
  void forward(const ForwardContext& ctx, const Weights& w, kernels::Matrix h, kernels::Matrix out);

 private:
  const ModelConfig& c_;
  DenseFfn ffn_;
  ScratchMatrix ffn_out_;  // [n][d]
  ScratchMatrix gate_;     // [n][1]
};

}  // namespace cadenza::model::blocks
