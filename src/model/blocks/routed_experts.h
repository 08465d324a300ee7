// Routed-experts block: a mixture-of-experts SwiGLU FFN (Mixtral-style llama, qwen3moe, qwen2moe,
// deepseek2, gpt-oss).
//
//   router   = h Wrouter (+ b_router)                           [n][E]
//   ids, w   = top-K of gating(router) (+ selection bias, within the best expert groups), ties
//              to the lower id; weights renormalised to sum 1 when config.moe_normalize_top_k,
//              times moe_weights_scale (kernels::RoutingParams)   [n][K]
//   gate, up = matmul_experts(Wgate_exps / Wup_exps, h, ids)    [n*K][f]   (+ the expert's bias)
//   slots    = matmul_experts(Wdown_exps, silu(gate) * up, ids) [n*K][d]   (+ the expert's bias)
//              (config.moe_swiglu_limit > 0: gpt-oss's clamped SwiGLU instead of silu(gate) * up)
//   out      = sum over s of w[t][s] * slots[t*K + s], in slot order   [n][d]
//              (config.moe_weight_input, llama4, K = 1: the weight scales the expert's input
//              instead, gate/up read w[t] h[t] and out = slots)
//
// Shapes: n = tokens of the step, d = n_embd, E / K = n_experts / n_experts_used, f = n_ff_expert.
// Tensors, per layer: `blk.N.ffn_gate_inp.weight` [E][d], `blk.N.ffn_{gate,up}_exps.weight`
// [E][f][d], `blk.N.ffn_down_exps.weight` [E][d][f]; `blk.N.exp_probs_b.bias` [E] (the selection
// bias, deepseek2 / glm4moe) where present; with config.moe_expert_bias (gpt-oss)
// `blk.N.ffn_gate_inp.bias` [E], `blk.N.ffn_{gate,up}_exps.bias` [E][f], `blk.N.ffn_down_exps.bias`
// [E][d] (split with their experts; tensor parallel: gate/up biases by columns, the down bias
// added by tensor-parallel rank 0 alone, so the all-reduce sums it once).
// Routing statistics: when ctx.expert_counts is set, the step's ids are read back and counted per
// (layer, expert).
//
// Tensor parallel (config.shard): every expert's FFN columns are split like a dense FFN's; expert
// parallel: this rank holds whole experts [e0, e0 + E/tp) and the ids of the others become -1
// (zero rows). Either way the router is whole and the output is all-reduced.
//
// Placement (config.expert_offload, --cpu-moe): the experts of the first layers may live on a
// second backend; there the block copies h over (read_view / write_view), routes and runs the
// experts with that backend's scratch, and copies the output back.
//
// One object per model (shape, scratch); one Weights per layer. Not thread-safe (scratch).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/scratch.h"
#include "model/weight_loader.h"

namespace cadenza::model::blocks {

class RoutedExperts {
 public:
  struct Weights {
    std::unique_ptr<kernels::Weight> router;             // [E][d]
    std::unique_ptr<kernels::Weight> gate, up, down;     // [E][f][d], [E][f][d], [E][d][f]
    std::unique_ptr<kernels::Weight> selection_bias;     // [E], or null
    std::unique_ptr<kernels::Weight> router_bias;        // [E], or null
    std::unique_ptr<kernels::Weight> gate_bias, up_bias, down_bias;  // [E][f], [E][f], [E][d], or null
    // Expert parallel: global expert id -> index among this rank's experts of the layer, -1
    // for another rank's ([E]; empty otherwise).
    std::vector<int32_t> local_of;
  };

  // `config` must outlive the block.
  explicit RoutedExperts(const ModelConfig& config);

  Status load(WeightLoader& loader, int64_t layer, Weights& w) const;
  Status reserve(kernels::Backend& backend, const StepCapacity& capacity);

  // h: [n][d]; out: [n][d], may be h.
  void forward(const ForwardContext& ctx, int64_t layer, const Weights& w, kernels::Matrix h,
               kernels::Matrix out);

 private:
  // The activations of one step on one backend.
  struct Scratch {
    ScratchMatrix router;     // [n][E]
    ScratchIndices ids;       // [n][K]
    ScratchMatrix weights;    // [n][K]
    ScratchMatrix gate, up;   // [n*K][f]
    ScratchMatrix slots;      // [n*K][d]
    ScratchMatrix in, out;    // [n][d] h and the output on the offload backend (else unused)
    ScratchMatrix in_weighted;  // [n][d] w h (config.moe_weight_input, else unused)
  };
  Status reserve(kernels::Backend& backend, const StepCapacity& capacity, Scratch& s,
                 bool staging);
  void run(const ForwardContext& ctx, kernels::Backend& be, Scratch& s, int64_t layer,
           const Weights& w, kernels::Matrix h, kernels::Matrix out);
  void localize(kernels::Backend& backend, Scratch& s, const Weights& w, int64_t pairs);

  const ModelConfig& c_;
  dist::Range columns_;  // the columns of each held expert
  // Whether this rank adds the experts' down bias (all ranks but tensor-parallel ranks > 0 of a
  // column split, whose partial outputs the all-reduce adds to rank 0's).
  bool adds_down_bias_;
  Scratch here_;         // on the model's backend
  Scratch offload_;      // on config.expert_offload.backend, when it holds layers
  std::vector<int32_t> ids_host_;  // the step's ids read back for the statistics (capacity n*K)
  std::vector<float> weights_host_;  // expert parallel: the step's weights (capacity n*K)
  std::vector<float> staging_;       // [n][d] on the host, crossing between the backends
};

}  // namespace cadenza::model::blocks
