// Model: a loaded model (config + weight handles in a backend) and its forward pass over a ragged
// batch of tokens from any number of sequences, reading and writing K/V through block tables.
//
//   auto file = gguf::GgufFile::open(path);                   // then share it with the model
//   auto backend = kernels::make_cpu_backend({.n_threads = 8});
//   auto model = Model::load(std::shared_ptr<gguf::GgufFile>(std::move(*file)), *backend);
//   auto kv = (*model)->create_kv_cache({.num_blocks = 256, .block_size = 16});
//   Batch b{...};  std::vector<float> logits(b.logit_rows.size() * n_vocab);
//   Status s = (*model)->forward(b, **kv, logits);
//
// For one sequence at a time, model::Session (session.h) wraps all of this.
//
// Ownership: the Model keeps the GgufFile alive (the backend may point into its mapping) and owns
// its weight handles and scratch buffers. The backend must outlive the Model.
// Thread-safety: forward() uses per-model scratch memory: one forward at a time per Model.
// config() and the weights are immutable and may be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "util/result.h"

namespace cadenza::gguf {
class GgufFile;
}

namespace cadenza::model {

// One forward step over a ragged batch: n tokens, each belonging to a sequence, at a position in
// that sequence. All spans are host memory and only need to live for the forward() call.
//
// Contract (checked, an error otherwise): token ids < n_vocab; 0 <= positions; seq_index[t] <
// block_tables.size(); every position's block (table[p / block_size]) exists and is
// < kv.num_blocks(); no two tokens of the batch write the same KV slot; logit_rows index tokens.
// Not checked (the caller's bookkeeping): a token at position p attends to positions 0..p of its
// sequence, so positions < p not in this batch must be in the cache from earlier steps, and blocks
// must not be shared between sequences unless their contents are identical (prefix sharing).
struct Batch {
  std::span<const int32_t> tokens;     // [n] token ids
  std::span<const int32_t> positions;  // [n] position of each token in its sequence
  std::span<const int32_t> seq_index;  // [n] index into block_tables
  // Per sequence: the KV blocks of its positions 0, block_size, 2*block_size, ... in order.
  std::span<const std::span<const int32_t>> block_tables;
  // Tokens whose logits are wanted, in the order the logits are returned.
  std::span<const int32_t> logit_rows;
};

// Weight handles of one transformer layer. Optional tensors are null when absent.
struct LayerWeights {
  std::unique_ptr<kernels::Weight> attn_norm;
  std::unique_ptr<kernels::Weight> wq, wk, wv, wo;
  std::unique_ptr<kernels::Weight> bq, bk, bv, bo;       // qkv_bias (bo: optional, llama)
  std::unique_ptr<kernels::Weight> q_norm, k_norm;       // qk_norm
  std::unique_ptr<kernels::Weight> ffn_norm;
  std::unique_ptr<kernels::Weight> ffn_gate, ffn_up, ffn_down;            // dense FFN
  std::unique_ptr<kernels::Weight> ffn_router;                            // [n_experts][n_embd]
  std::unique_ptr<kernels::Weight> ffn_gate_exps, ffn_up_exps, ffn_down_exps;  // experts
  // Shared expert (qwen2moe): gate/up [fs][n_embd], down [n_embd][fs], gate_inp [1][n_embd].
  std::unique_ptr<kernels::Weight> ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;
  std::unique_ptr<kernels::Weight> ffn_gate_inp_shexp;
};

struct ModelWeights {
  std::unique_ptr<kernels::Weight> token_embd;  // [n_vocab][n_embd]
  std::unique_ptr<kernels::Weight> output_norm;
  std::unique_ptr<kernels::Weight> output;      // null when tied: use token_embd
  std::unique_ptr<kernels::Weight> rope_freqs;  // Llama 3 frequency divisors, or null
  std::vector<LayerWeights> layers;

  const kernels::Weight& lm_head() const { return output ? *output : *token_embd; }
};

struct ForwardScratch;  // activation buffers, grown on demand (model.cpp)

// Options applied at load time, before any weight is used.
struct ModelLoadOptions {
  // Experts used per token (mixture-of-experts models only): 0 keeps the file's
  // expert_used_count; otherwise it must be in [1, expert_count] (an error otherwise, also for
  // dense models). Changes the model's quality/speed trade-off (logged as a warning).
  int64_t experts_per_token = 0;
};

class Model {
 public:
  // Reads the config from `file`'s metadata, checks that every tensor the architecture needs is
  // present with the expected shape and a supported type, and uploads the weights. Errors name
  // the file and the tensor or key.
  static Result<std::unique_ptr<Model>> load(std::shared_ptr<const gguf::GgufFile> file,
                                             kernels::Backend& backend,
                                             const ModelLoadOptions& options = {});
  // Opens `path` and loads it.
  static Result<std::unique_ptr<Model>> open(const std::string& path, kernels::Backend& backend,
                                             const ModelLoadOptions& options = {});
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  kernels::Backend& backend() const { return backend_; }
  const gguf::GgufFile& file() const { return *file_; }

  // A KV store shaped for this model.
  Result<std::unique_ptr<KvCache>> create_kv_cache(const KvCacheOptions& options) const;

  // Runs the batch, writing its tokens' K/V into `kv`, and stores the logits of
  // batch.logit_rows into `logits` ([logit_rows.size()][n_vocab], row-major; its size must match).
  // On error nothing has been computed (the batch is validated first).
  Status forward(const Batch& batch, KvCache& kv, std::span<float> logits);

  // Routing statistics (MoE models; all zero for dense ones): tokens routed to `expert` in
  // `layer` by every forward() so far (each token counts once per expert it uses, so a layer's
  // total is tokens x experts_used). Relaxed atomics: may be read from any thread while forward()
  // runs. Requires layer < n_layers and expert < n_experts.
  uint64_t expert_tokens(int64_t layer, int64_t expert) const;
  // Snapshot [layer][expert], row-major (n_layers x n_experts; empty for dense models).
  std::vector<uint64_t> expert_token_counts() const;
  void reset_expert_token_counts();

 private:
  Model(std::shared_ptr<const gguf::GgufFile> file, kernels::Backend& backend, ModelConfig config);
  Status validate(const Batch& batch, const KvCache& kv, size_t logits_size) const;

  std::shared_ptr<const gguf::GgufFile> file_;
  kernels::Backend& backend_;
  ModelConfig config_;
  ModelWeights weights_;
  std::unique_ptr<ForwardScratch> scratch_;
  std::unique_ptr<std::atomic<uint64_t>[]> expert_counts_;  // [n_layers * n_experts]
};

}  // namespace cadenza::model
