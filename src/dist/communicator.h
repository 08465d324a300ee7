// Communicator: the seam between the engine and whatever moves bytes between processes (MPI over
// TCP or InfiniBand today; NCCL between GPUs when built with it). Model code asks for a handful of
// collectives and point-to-point transfers over host memory; it never sees MPI.
//
//   Result<std::unique_ptr<Communicator>> world = dist::MpiRuntime::world();
//   (*world)->all_reduce_sum(hidden, n * d);              // every rank of the group, same order
//
// Contract of every operation: all ranks of the communicator call the collectives in the same
// order with matching sizes (a mismatch is a bug in the caller, not detected). Buffers are host
// memory and belong to the caller; they only need to live for the call. Failures are return
// values, never aborts: a transport error (a peer died) or a peer that does not answer within the
// timeout (set_timeout) returns an error naming the operation and, where it is known, the rank.
// After the first error the communicator is broken: every later call fails at once with the same
// message (a half-finished collective cannot be resumed).
// Thread-safety: one thread at a time per communicator (the engine thread).
// Units: sizes in bytes unless the name says elements (count); ranks within this communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "util/result.h"

namespace cadenza::dist {

// Time and bytes spent in one kind of operation, cumulative (cadenza_dist_* metrics).
struct OpStats {
  uint64_t calls = 0;
  uint64_t bytes = 0;   // payload this rank sent (collectives: the buffer size)
  double seconds = 0;   // wall time inside the call, waiting for peers included (not the
                        // unbounded waits of Wait::Forever: an idle worker is not communicating)
};

enum class Op { AllReduce, Broadcast, Gather, AllGather, Send, Recv, AllToAll, kCount };
const char* op_name(Op op);  // "all_reduce", "broadcast", ...

struct CommStats {
  OpStats ops[static_cast<size_t>(Op::kCount)];
  const OpStats& operator[](Op op) const { return ops[static_cast<size_t>(op)]; }
  OpStats& operator[](Op op) { return ops[static_cast<size_t>(op)]; }
};

// How long a call may wait for its peers.
enum class Wait {
  Bounded,  // at most timeout() seconds, then an error (the default)
  Forever,  // no limit (a worker waiting for the driver's next step while the server is idle)
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // A name for logs and errors: "world", "tp[stage 1]".
  virtual const std::string& name() const = 0;

  // In place: data[i] = sum over ranks of data[i]. The sum's order is fixed for a given size, so
  // results do not depend on timing.
  virtual Status all_reduce_sum(float* data, size_t count) = 0;
  // root's `bytes` at `data` to every rank.
  virtual Status broadcast(void* data, size_t bytes, int root, Wait wait = Wait::Bounded) = 0;
  // Rank r's `send_bytes[r]` bytes land at recv + sum(send_bytes[0..r)) on root (recv is only
  // read on root; send_bytes has size() entries, the same on every rank).
  virtual Status gather(const void* send, std::span<const size_t> send_bytes, void* recv,
                        int root) = 0;
  // Every rank's `bytes` (the same on all) to every rank, in rank order: recv holds size()*bytes.
  virtual Status all_gather(const void* send, size_t bytes, void* recv) = 0;
  // Rank r's block i (bytes_per_rank each) goes to rank i's block r.
  virtual Status all_to_all(const void* send, size_t bytes_per_rank, void* recv) = 0;
  virtual Status send(const void* data, size_t bytes, int peer) = 0;
  virtual Status recv(void* data, size_t bytes, int peer, Wait wait = Wait::Bounded) = 0;

  // The ranks that gave the same `color`, ordered by `key` (then by rank): a new communicator
  // with its own name. Every rank of this one must call it (a collective).
  virtual Result<std::unique_ptr<Communicator>> split(int color, int key, std::string name) = 0;

  // Bounded waits give up after this many seconds (default 30).
  void set_timeout(double seconds) { timeout_s_ = seconds; }
  double timeout() const { return timeout_s_; }
  const CommStats& stats() const { return stats_; }

 protected:
  double timeout_s_ = 30.0;
  CommStats stats_;
};

}  // namespace cadenza::dist
