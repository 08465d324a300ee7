// Distributed: a Model's link to the other processes of a job that splits it across ranks
// (dist/topology.h; docs/distributed.md). World rank 0, the driver, runs the engine as in one
// process; Model::forward, reserve, create_kv_cache and KvCache::copy_block on the driver send
// the same command to every worker first, so the workers (Model::serve_worker) run exactly the
// steps the driver's scheduler chose, with the same block tables: the KV pools stay identical.
//
// Per step: the driver broadcasts a CommandHeader and its payload (tokens, positions, sequence
// indices, logit rows, block tables); every rank runs its shard; tensor-parallel ranks all-reduce
// after each row-parallel matmul; stages pass the hidden state [n][d] on (send/recv between the
// same tp rank of neighbouring stages); the last stage gathers the vocabulary-parallel logits on
// its tp rank 0, which sends them to the driver unless it is the driver.
//
// Failures: every communication error is sticky (dist::Communicator); the forward pass runs on
// (every later collective fails at once) and Model::forward returns the error. A rank that does
// not answer within the timeout is named in the error.
// Ownership: the Model owns it; it borrows the world communicator, which must outlive it.
// Thread-safety: the engine thread only (like Model::forward).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/nccl_group.h"
#include "dist/topology.h"
#include "kernels/backend.h"
#include "model/shard.h"
#include "util/result.h"

namespace cadenza::gguf {
class GgufFile;
}

namespace cadenza::model {

struct ModelConfig;

// What the driver tells the workers, once per command.
enum class Command : int32_t {
  Forward = 1,  // args: n_tokens, n_logits, n_sequences, cache id; payload: the batch
  CreateKv,     // args: num_blocks, block_size, dtype, cache id
  FreeKv,       // args: cache id
  Reserve,      // args: the four StepCapacity fields
  CopyBlock,    // args: src, dst, num_tokens, cache id
  Ping,         // heartbeat: every worker answers the driver directly
  Stop,         // the driver is done: workers return from serve_worker
};
const char* command_name(Command c);

// One rank's communication totals (its world and tensor-parallel communicators together) and
// the (token, expert) pairs its experts computed: a worker sends its report with every
// heartbeat answer; the driver keeps the latest of each (cadenza_dist_* metrics).
struct RankReport {
  int32_t rank = 0;
  int32_t pad = 0;
  dist::CommStats comm;
  uint64_t expert_tokens = 0;  // under expert parallelism; tokens x experts used otherwise
};

struct CommandHeader {
  int32_t command = 0;
  int32_t pad = 0;
  int64_t args[5] = {};
  uint64_t payload_bytes = 0;
};

class Distributed {
 public:
  // Checks `config` against the model (head counts divisible, tp not above the heads, world
  // size = tp x pp), splits the world into tensor-parallel groups, and checks that every rank
  // opened the same file (size and an FNV-1a checksum of header and tensor table) and runs the
  // same build. Every rank gets an error it can print (the checks are collective where they can
  // be, so that no rank waits for one that already gave up).
  // `backend` is this rank's: with a GPU of its own on every rank of a tensor-parallel group
  // (and NCCL in the build) the all-reduces of device views run over NCCL, else through MPI
  // (device views staged on the host).
  static Result<std::unique_ptr<Distributed>> create(dist::Communicator& world,
                                                     const dist::ParallelConfig& config,
                                                     const gguf::GgufFile& file,
                                                     const ModelConfig& model,
                                                     kernels::Backend& backend);
  // Device scratch for NCCL all-reduces of up to `floats` elements (Model::reserve). Errors:
  // out of device memory.
  Status reserve(kernels::Backend& backend, int64_t floats);
  // Whether the tensor-parallel all-reduce runs over NCCL.
  bool uses_nccl() const { return nccl_ != nullptr; }
  ~Distributed();

  const dist::Topology& topology() const { return topology_; }
  const ModelShard& shard() const { return shard_; }
  bool driver() const { return topology_.driver(); }
  dist::Communicator& world() { return world_; }
  dist::Communicator& tp() { return *tp_; }

  // --- inside a forward pass. Errors are kept (step_status) instead of returned. ---
  // x[i] = sum over the stage's tp ranks (no-op at tp 1). x: contiguous.
  void all_reduce(kernels::Backend& backend, kernels::Matrix x);
  // The hidden state to the next stage / from the previous one (same tp rank).
  void send_hidden(kernels::Backend& backend, kernels::Matrix x);
  void recv_hidden(kernels::Backend& backend, kernels::Matrix x);
  // The last stage's vocabulary-parallel logits: `local` [n_rows][this rank's vocabulary
  // columns] from every tp rank of the last stage; the driver receives them whole into `out`
  // [n_rows][n_vocab] (other ranks pass an empty span).
  void deliver_logits(std::span<const float> local, int64_t n_rows, int64_t n_vocab,
                      std::span<float> out);
  // The first failure so far (sticky), or ok.
  Status status() const;
  void fail(Error e);

  // --- commands ---
  // Driver: `header` and `payload` to every worker.
  Status send_command(const CommandHeader& header, std::span<const uint8_t> payload);
  // Worker: the next command (waits as long as the driver is idle).
  Result<CommandHeader> receive_command(std::vector<uint8_t>& payload);
  // Driver: a heartbeat; an error names the first rank that did not answer within `timeout_s`.
  // The answers carry the workers' reports (reports()).
  Status ping(double timeout_s);
  // Worker: the answer to a Ping, with this rank's report (expert_tokens filled by the caller).
  Status answer_ping(uint64_t expert_tokens);
  // This rank's communication totals.
  dist::CommStats comm_stats() const;
  // Driver: every rank's latest report, index = world rank (the driver's own is current, the
  // workers' as of the last heartbeat; zeros before the first).
  std::vector<RankReport> reports(uint64_t own_expert_tokens) const;
  // Seconds the last heartbeat took (driver).
  double last_ping_seconds() const { return last_ping_s_; }

 private:
  Distributed(dist::Communicator& world, dist::Topology topology, ModelShard shard);
  Status choose_device_collectives(kernels::Backend& backend);

  dist::Communicator& world_;
  dist::Topology topology_;
  ModelShard shard_;
  std::unique_ptr<dist::Communicator> tp_;
  std::unique_ptr<dist::NcclGroup> nccl_;         // GPU ranks, each on its own device
  std::unique_ptr<kernels::Buffer> nccl_gather_;  // [tp][floats] device scratch
  std::vector<float> staging_;         // device-memory views, staged on the host
  std::vector<float> gathered_;        // logits of every tp rank, [tp][rows][cols of that rank]
  std::vector<float> full_logits_;     // the last stage's tp rank 0 when it is not the driver
  std::vector<int64_t> vocab_starts_;  // [tp + 1] first vocabulary row of each rank
  Error error_;
  bool failed_ = false;
  std::vector<RankReport> reports_;  // driver: the workers' latest, index = world rank
  double last_ping_s_ = 0;
};

}  // namespace cadenza::model
