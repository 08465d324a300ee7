// NcclGroup: a collective over device memory between the ranks of a host communicator, each
// rank on its own GPU, through NCCL (shipped with the CUDA toolkit). Built only when CMake finds
// nccl.h and libnccl beside a CUDA compiler (CADENZA_HAS_NCCL); nccl_built() says whether it was.
//
//   auto g = NcclGroup::create(tp_communicator, /*device=*/local_gpu);   // collective
//   g->all_gather(device_send, bytes, device_recv);                       // [size][bytes]
//
// The distributed forward pass (model/distributed.h) uses it when every rank of a
// tensor-parallel group has a GPU of its own: all-gather, then the sum in rank order with the
// backend's own add (bit-identical on every rank, independent of the step's size, like the MPI
// path). Where ranks share a GPU, or without NCCL, device views are staged through the host.
// Ownership: owns its NCCL communicator and stream; the host communicator is only used by
// create. Thread-safety: one thread at a time. The caller orders it with the backend's queue:
// the backend must have finished writing `send` (Backend::synchronize) and all_gather returns
// when `recv` is complete.
#pragma once

#include <cstddef>
#include <memory>

#include "dist/communicator.h"
#include "util/result.h"

namespace cadenza::dist {

bool nccl_built();

class NcclGroup {
 public:
  // Rank 0 of `group` creates the NCCL id and broadcasts it; every rank joins on `device`.
  // Errors: no NCCL in this build, a CUDA or NCCL failure (the message says which).
  static Result<std::unique_ptr<NcclGroup>> create(Communicator& group, int device);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  Status all_gather(const void* send, size_t bytes, void* recv);
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  NcclGroup() = default;
  struct State;
  std::unique_ptr<State> state_;
  int rank_ = 0, size_ = 1;
};

}  // namespace cadenza::dist
