// The feed-forward half of a DeepSeekMoE-style layer (deepseek2, glm4moe, llama4, granitehybrid): the first
// `leading_dense_block_count` layers (llama4: the layers between its `interleave_moe_layer_step`
// expert layers; config.dense_ffn_layer) have a dense SwiGLU FFN; the others routed experts plus
// `expert_shared_count` ungated shared experts (one SwiGLU FFN of that many expert widths).
//
//   dense layer:   x = x + s DenseFfn(h)
//   expert layer:  x = x + s SharedExperts(h) + s RoutedExperts(h)     (added in this order)
// with s = config.residual_scale (1 except in granitehybrid: Granite's residual multiplier).
//
// Shapes: n tokens, d = n_embd; h is the normed residual [n][d], x the residual [n][d].
// Tensors, per layer: `blk.N.ffn_{gate,up,down}.weight` (dense layers, width n_ff), the routed
// experts' (routed_experts.h) and `blk.N.ffn_{gate,up,down}_shexp.weight` (width
// n_ff_shared_expert, when > 0).
//
// One object per model (shape, scratch); one Weights per layer. Not thread-safe (scratch).
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "model/blocks/dense_ffn.h"
#include "model/blocks/routed_experts.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/scratch.h"
#include "model/weight_loader.h"

namespace cadenza::model::blocks {

class MixtureFfn {
 public:
  struct Weights {
    DenseFfn::Weights dense;         // leading dense layers
    RoutedExperts::Weights experts;  // the others
    DenseFfn::Weights shared;        // with n_ff_shared_expert > 0
  };

  // `config` must outlive the block.
  explicit MixtureFfn(const ModelConfig& config);

  Status load(WeightLoader& loader, int64_t layer, Weights& w) const;
  Status reserve(kernels::Backend& backend, const StepCapacity& capacity);

  // Adds layer `layer`'s FFN of h into x. h: [n][d], overwritten; x: [n][d].
  void forward(const ForwardContext& ctx, int64_t layer, const Weights& w, kernels::Matrix h,
               kernels::Matrix x);

  bool dense_layer(int64_t layer) const { return c_.dense_ffn_layer(layer); }

 private:
  bool has_shared() const { return c_.n_ff_shared_expert > 0; }

  const ModelConfig& c_;
  DenseFfn dense_;
  RoutedExperts experts_;
  DenseFfn shared_;
  ScratchMatrix shared_out_;  // [n][d] the shared experts' output, added before the routed sum
};

}  // namespace cadenza::model::blocks
