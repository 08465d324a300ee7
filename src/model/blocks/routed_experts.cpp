#include "model/blocks/routed_experts.h"

#include <atomic>
#include <tuple>

namespace cadenza::model::blocks {

using kernels::IndexMatrix;
using kernels::Matrix;

RoutedExperts::RoutedExperts(const ModelConfig& config)
    : c_(config), columns_(config.shard.expert_columns(config.n_ff_expert)) {}

Status RoutedExperts::load(WeightLoader& loader, int64_t layer, Weights& w) const {
  const int64_t d = c_.n_embd, f = c_.n_ff_expert, e = c_.n_experts;
  const ModelShard& shard = c_.shard;
  // Expert parallel: whole experts, a contiguous range (pointing into the file) or the
  // placement file's list (copied). Tensor parallel: every expert's columns.
  Slice held;
  std::vector<int32_t> pick;
  if (shard.expert_parallel) {
    const std::vector<int32_t> ids = shard.held_experts(layer, e);
    w.local_of.assign(static_cast<size_t>(e), -1);
    for (size_t i = 0; i < ids.size(); ++i) w.local_of[static_cast<size_t>(ids[i])] = static_cast<int32_t>(i);
    bool contiguous = true;
    for (size_t i = 1; i < ids.size(); ++i) contiguous = contiguous && ids[i] == ids[i - 1] + 1;
    if (contiguous) {
      held = matrices_of({ids.front(), static_cast<int64_t>(ids.size())});
    } else {
      pick = ids;
    }
  }
  const bool split = shard.tensor_parallel() && !shard.expert_parallel;
  const Slice rows = split ? rows_of(columns_) : Slice{};
  const Slice cols = split ? columns_of(columns_) : Slice{};
  auto name = [layer](const char* suffix) { return layer_tensor(layer, suffix); };
  const Load bias = required_if(c_.moe_expert_bias);
  if (c_.moe_expert_bias && shard.tensor_parallel()) {
    return make_error("blk.{}: experts with biases (gpt-oss) are not supported in a split model "
                      "yet", layer);
  }
  return loader.load({
      {w.router_bias, name("ffn_gate_inp.bias"), {e}, bias},
      {w.gate_bias, name("ffn_gate_exps.bias"), {f, e}, bias},
      {w.up_bias, name("ffn_up_exps.bias"), {f, e}, bias},
      {w.down_bias, name("ffn_down_exps.bias"), {d, e}, bias},
      {w.router, name("ffn_gate_inp.weight"), {d, e}},
      {w.selection_bias, name("exp_probs_b.bias"), {e}, Load::IfPresent},
      {w.gate, name("ffn_gate_exps.weight"), {d, f, e}, Load::Required, held, rows, pick},
      {w.up, name("ffn_up_exps.weight"), {d, f, e}, Load::Required, held, rows, pick},
      {w.down, name("ffn_down_exps.weight"), {f, d, e}, Load::Required, held, cols, pick},
  });
}

Status RoutedExperts::reserve(kernels::Backend& backend, const StepCapacity& capacity) {
  const int64_t n = capacity.max_tokens, k = c_.n_experts_used;
  if (Status st = ids_.reserve(backend, n, k); !st) return st;
  for (auto [scratch, rows, cols] : {std::tuple{&router_, n, c_.n_experts},
                                     std::tuple{&weights_, n, k},
                                     std::tuple{&gate_, n * k, columns_.count},
                                     std::tuple{&up_, n * k, columns_.count},
                                     std::tuple{&slots_, n * k, c_.n_embd}}) {
    if (Status st = scratch->reserve(backend, rows, cols); !st) return st;
  }
  ids_host_.reserve(static_cast<size_t>(n * k));
  weights_host_.reserve(static_cast<size_t>(n * k));
  return {};
}

void RoutedExperts::forward(const ForwardContext& ctx, int64_t layer, const Weights& w, Matrix h,
                            Matrix out) {
  kernels::Backend& be = ctx.backend;
  const int64_t n = ctx.inputs.n_tokens, k = c_.n_experts_used;
  const Matrix router = router_.rows(n);
  const IndexMatrix ids = ids_.rows(n);
  const Matrix weights = weights_.rows(n);
  const Matrix gate = gate_.rows(n * k), up = up_.rows(n * k), slots = slots_.rows(n * k);
  kernels::RoutingParams routing;
  routing.normalize_top_k = c_.moe_normalize_top_k;
  routing.scale = c_.moe_weights_scale;
  routing.gating = c_.moe_gating;
  routing.selection_bias = w.selection_bias.get();
  routing.n_groups = static_cast<int32_t>(c_.moe_groups);
  routing.n_groups_used = static_cast<int32_t>(c_.moe_groups_used);

  be.matmul(*w.router, h, router);  // [n][E]
  if (w.router_bias) be.add_bias(router, *w.router_bias, router);
  be.route_experts(router, routing, ids, weights);
  if (ctx.expert_counts != nullptr) {
    ids_host_.resize(static_cast<size_t>(n * k));  // within the reserved capacity
    be.read(ids_.buffer(), 0, ids_host_.data(), ids_host_.size() * sizeof(int32_t));
    std::atomic<uint64_t>* counts = ctx.expert_counts + static_cast<size_t>(layer * c_.n_experts);
    for (const int32_t e : ids_host_) counts[e].fetch_add(1, std::memory_order_relaxed);
  }
  if (c_.shard.expert_parallel) localize(be, w, n * k);
  be.matmul_experts(*w.gate, h, ids, gate);  // [n*K][f]
  be.matmul_experts(*w.up, h, ids, up);      // [n*K][f]
  if (w.gate_bias) {
    be.add_expert_bias(gate, *w.gate_bias, ids);
    be.add_expert_bias(up, *w.up_bias, ids);
  }
  if (c_.moe_swiglu_limit > 0) {
    be.swiglu_clamped(gate, up, c_.moe_swiglu_alpha, c_.moe_swiglu_limit, gate);
  } else {
    be.swiglu(gate, up, gate);
  }
  be.matmul_experts(*w.down, gate, ids, slots);  // [n*K][d]
  if (w.down_bias) be.add_expert_bias(slots, *w.down_bias, ids);
  be.weighted_sum_slots(slots, weights, out);    // [n][d]
  tp_all_reduce(ctx, out);  // the other ranks' experts, or the other columns of every expert
}

// The step's expert ids as indices into this rank's experts: -1 (a zero row, weight 0) for an
// expert another rank holds. On the host: n*K ids and weights, read and written back.
void RoutedExperts::localize(kernels::Backend& be, const Weights& w, int64_t pairs) {
  ids_host_.resize(static_cast<size_t>(pairs));
  weights_host_.resize(static_cast<size_t>(pairs));
  be.read(ids_.buffer(), 0, ids_host_.data(), ids_host_.size() * sizeof(int32_t));
  be.read(weights_.buffer(), 0, weights_host_.data(), weights_host_.size() * sizeof(float));
  for (size_t i = 0; i < ids_host_.size(); ++i) {
    const int32_t local = w.local_of[static_cast<size_t>(ids_host_[i])];
    const bool held = local >= 0;
    ids_host_[i] = local;
    if (!held) weights_host_[i] = 0.0f;
  }
  be.write(ids_.buffer(), 0, ids_host_.data(), ids_host_.size() * sizeof(int32_t));
  be.write(weights_.buffer(), 0, weights_host_.data(), weights_host_.size() * sizeof(float));
}

}  // namespace cadenza::model::blocks
