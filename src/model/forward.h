// Internal to src/model: what Model::forward hands to an architecture family's forward pass, and
// the scratch buffers those passes share. Not part of the public API.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "util/result.h"

namespace cadenza::model {

// A validated Batch, uploaded to backend memory.
struct StepInputs {
  int64_t n_tokens = 0;
  int64_t n_logits = 0;
  kernels::IndexMatrix tokens;      // [n_tokens][1]
  kernels::IndexMatrix slots;       // [n_tokens][1] KV slot of each token
  kernels::IndexMatrix logit_rows;  // [n_logits][1]
  kernels::AttentionBatch attention;
};

// Backend buffers reused from step to step; each grows when a batch needs more.
struct ForwardScratch {
  // batch inputs
  std::unique_ptr<kernels::Buffer> tokens, positions, seq_index, slots, block_tables, logit_rows;
  // activations
  std::unique_ptr<kernels::Buffer> x, h, q, k, v, attn, gate, up;
  std::unique_ptr<kernels::Buffer> router, expert_ids, expert_weights, expert_out;
  std::unique_ptr<kernels::Buffer> shared_gate, shared_up, shared_out, shared_weight;  // qwen2moe
  std::unique_ptr<kernels::Buffer> hidden_out, logits;
  std::vector<int32_t> expert_ids_host;  // routing of one layer, read back for the statistics
};

// Makes `buffer` at least `size_bytes` large (reallocating without preserving contents).
Status ensure_buffer(kernels::Backend& backend, std::unique_ptr<kernels::Buffer>& buffer,
                     size_t size_bytes);

// Everything a family's forward pass reads, and the scratch it may use.
struct ForwardContext {
  const ModelConfig& config;
  const ModelWeights& weights;
  kernels::Backend& backend;
  ForwardScratch& scratch;
  const StepInputs& inputs;
  KvCache& kv;
  // [n_layers * n_experts] routing counters to add to (MoE), or null.
  std::atomic<uint64_t>* expert_counts = nullptr;
};

// The llama-family pass (llama, qwen2, qwen3, qwen3moe, qwen2moe): returns the logits of the requested rows,
// [n_logits][n_vocab], in backend memory (scratch.logits).
Result<kernels::Matrix> forward_llama_family(const ForwardContext& ctx);

}  // namespace cadenza::model
