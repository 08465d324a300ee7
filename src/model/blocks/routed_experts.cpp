#include "model/blocks/routed_experts.h"

#include <atomic>
#include <tuple>

#include "gguf/gguf.h"

namespace cadenza::model::blocks {

using kernels::IndexMatrix;
using kernels::Matrix;

RoutedExperts::RoutedExperts(const ModelConfig& config)
    : c_(config),
      columns_(config.shard.expert_columns(config.n_ff_expert)),
      adds_down_bias_(!config.shard.tensor_parallel() || config.shard.expert_parallel ||
                      config.shard.tp_rank == 0) {}

Status RoutedExperts::load(WeightLoader& loader, int64_t layer, Weights& w) const {
  const int64_t d = c_.n_embd, f = c_.n_ff_expert, e = c_.n_experts;
  const ModelShard& shard = c_.shard;
  if (c_.moe_weight_input && c_.n_experts_used != 1) {
    return make_error("{}: experts weighted at their input (llama4) take one expert per token; "
                      "this file uses {}", loader.file().name(), c_.n_experts_used);
  }
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
  // The per-expert biases ([E][f], [E][d]) follow their matrices: this rank's experts (rows of
  // the 2-d tensor), or this rank's columns of every expert's gate/up bias. The down bias is
  // whole; split by columns, only tensor-parallel rank 0 adds it (adds_down_bias_).
  const Slice held_rows = held.dim < 0 ? Slice{} : rows_of({held.begin, held.count});
  const Slice up_bias_part = split ? columns_of(columns_) : held_rows;
  auto name = [layer](const char* suffix) { return layer_tensor(layer, suffix); };
  kernels::Backend* placed = c_.expert_offload.holds(layer) ? c_.expert_offload.backend : nullptr;
  const Load bias = required_if(c_.moe_expert_bias);
  return loader.load({
      {w.router_bias, name("ffn_gate_inp.bias"), {e}, bias, {}, {}, {}, placed},
      {w.gate_bias, name("ffn_gate_exps.bias"), {f, e}, bias, up_bias_part, {}, pick, placed},
      {w.up_bias, name("ffn_up_exps.bias"), {f, e}, bias, up_bias_part, {}, pick, placed},
      {w.down_bias, name("ffn_down_exps.bias"), {d, e}, bias, held_rows, {}, pick, placed},
      {w.router, name("ffn_gate_inp.weight"), {d, e}, Load::Required, {}, {}, {}, placed},
      {w.selection_bias, name("exp_probs_b.bias"), {e}, Load::IfPresent, {}, {}, {}, placed},
      {w.gate, name("ffn_gate_exps.weight"), {d, f, e}, Load::Required, held, rows, pick, placed},
      {w.up, name("ffn_up_exps.weight"), {d, f, e}, Load::Required, held, rows, pick, placed},
      {w.down, name("ffn_down_exps.weight"), {f, d, e}, Load::Required, held, cols, pick, placed},
  });
}

Status RoutedExperts::reserve(kernels::Backend& backend, const StepCapacity& capacity) {
  if (Status st = reserve(backend, capacity, here_, false); !st) return st;
  if (c_.expert_offload.backend != nullptr && c_.expert_offload.layers > 0) {
    if (Status st = reserve(*c_.expert_offload.backend, capacity, offload_, true); !st) return st;
    staging_.reserve(static_cast<size_t>(capacity.max_tokens * c_.n_embd));
  }
  const int64_t pairs = capacity.max_tokens * c_.n_experts_used;
  ids_host_.reserve(static_cast<size_t>(pairs));
  weights_host_.reserve(static_cast<size_t>(pairs));
  return {};
}

Status RoutedExperts::reserve(kernels::Backend& backend, const StepCapacity& capacity, Scratch& s,
                              bool staging) {
  const int64_t n = capacity.max_tokens, k = c_.n_experts_used;
  if (Status st = s.ids.reserve(backend, n, k); !st) return st;
  const int64_t staged = staging ? n : 0;
  for (auto [scratch, rows, cols] : {std::tuple{&s.router, n, c_.n_experts},
                                     std::tuple{&s.weights, n, k},
                                     std::tuple{&s.gate, n * k, columns_.count},
                                     std::tuple{&s.up, n * k, columns_.count},
                                     std::tuple{&s.slots, n * k, c_.n_embd},
                                     std::tuple{&s.in, staged, c_.n_embd},
                                     std::tuple{&s.out, staged, c_.n_embd},
                                     std::tuple{&s.in_weighted, c_.moe_weight_input ? n : 0,
                                                c_.n_embd}}) {
    if (Status st = scratch->reserve(backend, rows, cols); !st) return st;
  }
  return {};
}

void RoutedExperts::forward(const ForwardContext& ctx, int64_t layer, const Weights& w, Matrix h,
                            Matrix out) {
  if (!c_.expert_offload.holds(layer)) {
    run(ctx, ctx.backend, here_, layer, w, h, out);
    return;
  }
  // The experts live on the offload backend: h over, the block there, the output back.
  kernels::Backend& other = *c_.expert_offload.backend;
  const int64_t n = ctx.inputs.n_tokens;
  const Matrix in = offload_.in.rows(n), result = offload_.out.rows(n);
  staging_.resize(static_cast<size_t>(n * c_.n_embd));  // within the reserved capacity
  ctx.backend.read_view(h, staging_.data());
  other.write_view(staging_.data(), in);
  run(ctx, other, offload_, layer, w, in, result);
  other.read_view(result, staging_.data());
  ctx.backend.write_view(staging_.data(), out);
}

void RoutedExperts::run(const ForwardContext& ctx, kernels::Backend& be, Scratch& s, int64_t layer,
                        const Weights& w, Matrix h, Matrix out) {
  const int64_t n = ctx.inputs.n_tokens, k = c_.n_experts_used;
  const Matrix router = s.router.rows(n);
  const IndexMatrix ids = s.ids.rows(n);
  const Matrix weights = s.weights.rows(n);
  const Matrix gate = s.gate.rows(n * k), up = s.up.rows(n * k), slots = s.slots.rows(n * k);
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
    be.read(s.ids.buffer(), 0, ids_host_.data(), ids_host_.size() * sizeof(int32_t));
    std::atomic<uint64_t>* counts = ctx.expert_counts + static_cast<size_t>(layer * c_.n_experts);
    for (const int32_t e : ids_host_) counts[e].fetch_add(1, std::memory_order_relaxed);
  }
  if (c_.shard.expert_parallel) localize(be, s, w, n * k);
  // Llama 4 weighs the expert's input (top-1, Status-checked at load): x = w h, out = FFN_e(x).
  const Matrix x = c_.moe_weight_input ? s.in_weighted.rows(n) : h;
  if (c_.moe_weight_input) be.weighted_sum_slots(h, weights, x);  // K = 1: w[t] * h[t]
  be.matmul_experts(*w.gate, x, ids, gate);  // [n*K][f]
  be.matmul_experts(*w.up, x, ids, up);      // [n*K][f]
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
  if (w.down_bias && adds_down_bias_) be.add_expert_bias(slots, *w.down_bias, ids);
  if (c_.moe_weight_input) {
    be.copy_matrix(slots, out);  // K = 1, already weighted
  } else {
    be.weighted_sum_slots(slots, weights, out);  // [n][d]
  }
  tp_all_reduce(ctx, out);  // the other ranks' experts, or the other columns of every expert
}

// The step's expert ids as indices into this rank's experts: -1 (a zero row, weight 0) for an
// expert another rank holds. On the host: n*K ids and weights, read and written back.
void RoutedExperts::localize(kernels::Backend& be, Scratch& s, const Weights& w, int64_t pairs) {
  ids_host_.resize(static_cast<size_t>(pairs));
  weights_host_.resize(static_cast<size_t>(pairs));
  be.read(s.ids.buffer(), 0, ids_host_.data(), ids_host_.size() * sizeof(int32_t));
  be.read(s.weights.buffer(), 0, weights_host_.data(), weights_host_.size() * sizeof(float));
  for (size_t i = 0; i < ids_host_.size(); ++i) {
    const int32_t local = w.local_of[static_cast<size_t>(ids_host_[i])];
    const bool held = local >= 0;
    ids_host_[i] = local;
    if (!held) weights_host_[i] = 0.0f;
  }
  be.write(s.ids.buffer(), 0, ids_host_.data(), ids_host_.size() * sizeof(int32_t));
  be.write(s.weights.buffer(), 0, weights_host_.data(), weights_host_.size() * sizeof(float));
}

}  // namespace cadenza::model::blocks
