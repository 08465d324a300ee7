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
// Layout: this class is the architecture-independent half (validation, upload, dispatch,
// read-back); each family's tensors and forward pass live in arch/<family>.cpp (registry.h).
// Thread-safety: forward() and reserve() use per-model scratch memory: one of them at a time per
// Model.
// config() and the weights are immutable and may be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "dist/communicator.h"
#include "dist/topology.h"
#include "model/config.h"
#include "model/distributed.h"
#include "model/kv_cache.h"
#include "model/scratch.h"
#include "model/step_capacity.h"
#include "util/result.h"

namespace cadenza::gguf {
class GgufFile;
}

namespace cadenza::model {

// Positions [first, last] of batch sequence `seq` (an index into Batch::block_tables) whose
// tokens attend to each other both ways (Batch::attention_spans).
struct AttentionSpan {
  int32_t seq = 0;
  int32_t first = 0;
  int32_t last = 0;
};

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
  // Hybrid models (ModelConfig::hybrid): per sequence, its recurrent-state slot in the KV cache
  // (< kv.num_state_slots(), distinct among the batch's sequences); empty: sequence i uses slot
  // i. A sequence's tokens must come in order of consecutive positions; the state continues
  // from its last step (position 0 starts afresh). Ignored for other models.
  std::span<const int32_t> state_slots = {};
  // A KV cache with a window group (KvCacheOptions::num_window_blocks > 0): per sequence, the
  // windowed layers' table (kv::KvCacheManager::window_block_table), as many as block_tables.
  // Only the entries of a sequence's window are read: those of positions
  // max(0, first position here - window + 1) .. its last position here must be valid window
  // blocks (< kv.num_window_blocks()); entries before may be -1. Ignored without a window group.
  std::span<const std::span<const int32_t>> window_block_tables = {};
  // Input embeddings given instead of looked up (image embeddings at their placeholder tokens):
  // batch row embd_rows[i] enters the network as embd_values[i * n_embd .. (i + 1) * n_embd)
  // (after the embedding scale other rows get). Rows distinct and < n; the token id at such a
  // row is ignored but must still be in range. Not supported on a model split across processes.
  std::span<const int32_t> embd_rows = {};
  std::span<const float> embd_values = {};
  // Non-causal spans (one image's tokens in Gemma 3, which attend to each other both ways): a
  // token of sequence `seq` at a position in [first, last] attends to its sequence's positions
  // up to `last` instead of up to its own (a sliding window still starts from its own). Every
  // position of a span from its sequence's first position in this batch on must be in the batch:
  // a step may begin inside a span (the part before it computed earlier with the whole span) but
  // never end inside it. Needs Backend::supports_attention_spans(); not on a split model.
  std::span<const AttentionSpan> attention_spans = {};
};

class ArchitectureRegistry;
class Network;
struct StepInputs;

// Options applied at load time, before any weight is used.
struct ModelLoadOptions {
  // Experts used per token (mixture-of-experts models only): 0 keeps the file's
  // expert_used_count; otherwise it must be in [1, expert_count] (an error otherwise, also for
  // dense models). Changes the model's quality/speed trade-off (logged as a warning).
  int64_t experts_per_token = 0;
  // The step size reserved at load (Model::reserve); the engine and Session reserve their own.
  StepCapacity capacity = {};
  // The families to choose from by `general.architecture`; null: ArchitectureRegistry::builtin().
  // Lets a test (or an embedder) add a family without touching src/model (registry.h).
  const ArchitectureRegistry* architectures = nullptr;
  // A job that splits the model across processes (distributed.h, docs/distributed.md): every
  // rank of `world` (borrowed; must outlive the model) loads with the same `parallel` and holds
  // its shard. Null or a world of one process: the whole model here.
  dist::Communicator* world = nullptr;
  dist::ParallelConfig parallel = {};
  // Routed experts of the first `layers` layers (all: a large number) kept on `backend` instead
  // of the model's (ModelConfig::ExpertOffload). Not with a split model.
  ModelConfig::ExpertOffload expert_offload = {};
};

class Model {
 public:
  // Reads the config from `file`'s metadata, checks that every tensor the architecture needs is
  // present with the expected shape and a supported type, uploads the weights and reserves
  // options.capacity. Errors name the file and the tensor or key.
  static Result<std::unique_ptr<Model>> load(std::shared_ptr<const gguf::GgufFile> file,
                                             kernels::Backend& backend,
                                             const ModelLoadOptions& options = {});
  // Opens `path` and loads it.
  static Result<std::unique_ptr<Model>> open(const std::string& path, kernels::Backend& backend,
                                             const ModelLoadOptions& options = {});
  ~Model();

  const ModelConfig& config() const { return config_; }
  kernels::Backend& backend() const { return backend_; }
  const gguf::GgufFile& file() const { return *file_; }

  // A KV store shaped for this model (this rank's heads and layers when it is split). On a split
  // model's driver every worker creates its own with the same options and id; forward() on the
  // cache, its copy_block and its destruction reach the workers' copy.
  Result<std::unique_ptr<KvCache>> create_kv_cache(const KvCacheOptions& options);

  // Shapes and allocates the scratch memory of every step up to `capacity` (activations, batch
  // inputs, logits), so that forward() allocates nothing. The reservation only grows, field by
  // field (an engine and a session on one model each reserve what they need). Errors: a field
  // < 1 or > 2^24, out of backend memory (the previous reservation stays usable).
  Status reserve(const StepCapacity& capacity);
  // What forward() accepts now.
  const StepCapacity& capacity() const { return capacity_; }

  // Runs the batch, writing its tokens' K/V into `kv`, and stores the logits of
  // batch.logit_rows into `logits` ([logit_rows.size()][n_vocab], row-major; its size must match).
  // On error nothing has been computed (the batch is validated first). A batch larger than the
  // reservation (more tokens, logit rows, sequences or blocks per sequence than capacity()) is an
  // error that says which limit, never a reallocation.
  Status forward(const Batch& batch, KvCache& kv, std::span<float> logits);
  // The same step, but instead of logits it stores the final normalized hidden state of
  // batch.logit_rows (the output head's input, rms_norm(x) * output_norm) into `hidden`
  // ([logit_rows.size()][n_embd], row-major; its size must match): what decoder embedding models
  // pool (model/pooling.h). Errors as forward(); also on a split model (not supported yet).
  Status forward_hidden(const Batch& batch, KvCache& kv, std::span<float> hidden);

  // --- split models (ModelLoadOptions::world) ---
  // The link to the other ranks, or null in one process.
  const Distributed* distributed() const { return distributed_.get(); }
  // True on the driver (world rank 0) and in one process: the rank that runs the engine.
  bool is_driver() const { return !distributed_ || distributed_->driver(); }
  // Worker ranks: runs the driver's commands (forward, reserve, KV creation and block copies,
  // heartbeats) until the driver stops. Errors: a failed transfer, a command that fails here
  // (the job cannot continue; the caller exits non-zero).
  Status serve_worker();
  // Driver: a heartbeat that every worker answers within `timeout_s` (an error names the first
  // that did not), and the end of the workers' loops (also sent by the destructor).
  Status ping(double timeout_s);
  Status stop_workers();
  // (token, expert) pairs computed by the experts this rank holds, in its layers (MoE).
  uint64_t held_expert_tokens() const;

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
  // `logits_size` is checked unless it is SIZE_MAX (a worker, which returns no logits).
  Status validate(const Batch& batch, const KvCache& kv, size_t logits_size);
  Status validate_recurrent(const Batch& batch, const KvCache& kv);
  Status validate_window(const Batch& batch, const KvCache& kv);
  Status validate_spans(const Batch& batch);
  // window_group: the cache keeps one (KvCache::has_window_group; the batch was validated so).
  void upload(const Batch& batch, int32_t block_size, bool window_group, StepInputs& inputs);
  Status reserve_here(const StepCapacity& capacity);
  // This rank's part of a validated step; `logits` is empty on workers.
  Status forward_shard(const Batch& batch, KvCache& kv, std::span<float> logits);
  // A split model's part of a step (model_distributed.cpp): in micro-batches on a pipeline,
  // then the logits to the driver.
  Status forward_split(const Batch& batch, const StepInputs& inputs, KvCache& kv,
                       std::span<float> logits);
  // The driver's Forward command for a validated batch.
  Status send_forward(const Batch& batch, int64_t kv_id);
  Status run_command(const CommandHeader& h, const std::vector<uint8_t>& payload,
                     std::map<int64_t, std::unique_ptr<KvCache>>& caches);

  std::shared_ptr<const gguf::GgufFile> file_;
  kernels::Backend& backend_;
  ModelConfig config_;
  std::unique_ptr<Network> network_;  // the family's weights, scratch and forward pass
  StepCapacity capacity_{0, 0, 0, 0};
  // The batch in backend memory: [tokens][1] ids, positions, sequence indices and KV slots,
  // [logit rows][1], [sequences][blocks per sequence]; and the logits [logit rows][n_vocab].
  ScratchIndices tokens_, positions_, seq_index_, slots_, logit_rows_, block_tables_;
  ScratchIndices state_slots_;  // [n][1] hybrid models: each token's state slot
  // A window group (Batch::window_block_tables): its slots [n][1] and tables [seqs][blocks].
  ScratchIndices window_slots_, window_tables_;
  ScratchIndices last_positions_;  // [n][1] Batch::attention_spans: each token's last position
  ScratchMatrix logits_;
  // Host-side work of validate/upload, reserved with the rest.
  std::vector<int32_t> host_slots_, host_tables_, max_position_, host_state_slots_;
  std::vector<int32_t> min_position_, host_window_slots_, host_window_tables_, host_last_;
  std::vector<int64_t> sorted_slots_;
  std::unique_ptr<std::atomic<uint64_t>[]> expert_counts_;  // [n_layers * n_experts]
  std::unique_ptr<Distributed> distributed_;  // null in one process
  bool workers_stopped_ = false;
  int64_t next_kv_id_ = 1;  // the id of the next KV cache (the workers hold theirs by id)
  std::vector<int32_t> message_;  // the driver's Forward payload / a worker's copy of it
  std::vector<float> local_logits_;  // this rank's vocabulary columns, on the host
  // forward_pipelined: the logit rows of each micro-batch (local indices, in micro-batch
  // order), their positions in the step's output, and the logits put back in that order.
  std::vector<int32_t> micro_logit_rows_, micro_order_;
  std::vector<float> ordered_logits_;
};

}  // namespace cadenza::model
