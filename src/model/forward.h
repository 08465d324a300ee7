// Internal to src/model: what Model::forward hands to a family's forward pass (ForwardContext),
// and Network, the loaded family (its weights, scratch and forward pass) behind a Model.
#pragma once

#include <span>

#include <atomic>
#include <cstdint>
#include <memory>

#include "kernels/backend.h"
#include "model/distributed.h"
#include "model/kv_cache.h"
#include "model/step_capacity.h"
#include "util/result.h"

namespace cadenza::model {

struct ModelConfig;
class WeightLoader;

// A validated Batch, uploaded to backend memory.
struct StepInputs {
  int64_t n_tokens = 0;
  int64_t n_logits = 0;
  kernels::IndexMatrix tokens;      // [n_tokens][1]
  kernels::IndexMatrix slots;       // [n_tokens][1] KV slot of each token
  kernels::IndexMatrix logit_rows;  // [n_logits][1]
  kernels::AttentionBatch attention;
  kernels::RecurrentBatch recurrent;  // hybrid models only (positions shared with attention)
  // A KV cache with a window group (KvCache::in_window_group): the windowed layers' KV slot of
  // each token and their block tables (positions and sequence indices as in `attention`).
  kernels::IndexMatrix window_slots;
  kernels::AttentionBatch window_attention;
  // Batch::embd_rows / embd_values, host memory (TokenEmbedding writes them over the lookup).
  std::span<const int32_t> embd_rows;
  std::span<const float> embd_values;
};

// Everything one step of a family's forward pass reads and writes besides its own weights and
// scratch. The step lies within the reservation (Model::forward checked it).
struct ForwardContext {
  kernels::Backend& backend;
  const StepInputs& inputs;
  KvCache& kv;
  // [n_layers * n_experts] routing counters to add to (MoE), or null.
  std::atomic<uint64_t>* expert_counts;
  // Output: the logits of inputs.logit_rows, [n_logits][n_vocab], in backend memory; under
  // tensor parallelism [n_logits][this rank's vocabulary rows] (shard.h).
  kernels::Matrix logits;
  // The other ranks when the model is split (distributed.h), else null.
  Distributed* distributed = nullptr;
  // Model::forward_hidden: the head stops before its output matrix and writes the final
  // normalized hidden state of inputs.logit_rows, [n_logits][n_embd], into `logits` instead (the
  // input of the output head: what decoder embedding models pool). One process only.
  bool hidden_only = false;
};

// The sum over the tensor-parallel ranks of a row-parallel block's partial output, in place
// (nothing to do in one process).
inline void tp_all_reduce(const ForwardContext& ctx, kernels::Matrix x) {
  if (ctx.distributed != nullptr) ctx.distributed->all_reduce(ctx.backend, x);
}

// A loaded architecture family: created by its ArchitectureFamily::load hook (registry.h), owned
// by the Model. Thread-safety: like Model, one reserve() or forward() at a time.
class Network {
 public:
  virtual ~Network() = default;

  // Shapes and allocates the activation scratch for any step within `capacity`. Model::reserve
  // calls it with the model's whole (merged, never shrinking) capacity. Errors: out of memory.
  virtual Status reserve(kernels::Backend& backend, const StepCapacity& capacity) = 0;

  // One step: writes the batch's K/V into ctx.kv and the requested logits into ctx.logits.
  // Cannot fail and allocates nothing: the batch was validated and lies within the reservation.
  virtual void forward(const ForwardContext& ctx) = 0;
};

// The usual ArchitectureFamily::load hook: constructs a `Family` network from the config (which
// outlives it) and calls its `Status load(WeightLoader&)`.
template <typename Family>
Result<std::unique_ptr<Network>> load_network(const ModelConfig& config, WeightLoader& loader) {
  auto network = std::make_unique<Family>(config);
  if (Status st = network->load(loader); !st) return st.error_value();
  return std::unique_ptr<Network>(std::move(network));
}

}  // namespace cadenza::model
