#include "dist/nccl_group.h"

#ifdef CADENZA_HAS_NCCL
#include <cuda_runtime.h>

#include "dist/nccl_api.h"
#endif

#include <fmt/format.h>

namespace cadenza::dist {

#ifdef CADENZA_HAS_NCCL

struct NcclGroup::State {
  const NcclApi* nccl = nullptr;  // process-wide (nccl_api())
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
};

bool nccl_built() { return true; }

namespace {

Status cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  return make_error("nccl group: {}: {}", what, cudaGetErrorString(e));
}

Status nccl_check(const NcclApi& nccl, ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return {};
  return make_error("nccl group: {}: {}", what, nccl.error_string(r));
}

}  // namespace

Result<std::unique_ptr<NcclGroup>> NcclGroup::create(Communicator& group, int device) {
  std::unique_ptr<NcclGroup> g(new NcclGroup());
  g->state_ = std::make_unique<State>();
  g->state_->device = device;
  g->rank_ = group.rank();
  g->size_ = group.size();
  // NCCL is opened now, by a rank that joins a group, never by one that does not. The ranks
  // agree on whether all of them could open it before any goes on, so that none is left waiting
  // in a collective that another has given up on.
  Result<const NcclApi*> api = nccl_api();
  float ranks_without_nccl = api ? 0.0f : 1.0f;
  if (Status st = group.all_reduce_sum(&ranks_without_nccl, 1); !st) return st.error_value();
  if (!api) return make_error("nccl group: {}", api.error());
  if (ranks_without_nccl > 0) {
    return make_error("nccl group: {} of the {} ranks could not open NCCL (each one's own "
                      "error names the library)",
                      static_cast<int>(ranks_without_nccl), g->size_);
  }
  const NcclApi& nccl = **api;
  g->state_->nccl = &nccl;
  ncclUniqueId id{};
  if (group.rank() == 0) {
    if (Status st = nccl_check(nccl, nccl.get_unique_id(&id), "ncclGetUniqueId"); !st) {
      // The others wait for the id: send them a zeroed one so that they fail too, not hang.
      (void)group.broadcast(&id, sizeof id, 0);
      return st.error_value();
    }
  }
  if (Status st = group.broadcast(&id, sizeof id, 0); !st) return st.error_value();
  if (Status st = cuda_check(cudaSetDevice(device), "cudaSetDevice"); !st) return st.error_value();
  if (Status st = cuda_check(cudaStreamCreateWithFlags(&g->state_->stream, cudaStreamNonBlocking),
                             "cudaStreamCreate");
      !st) {
    return st.error_value();
  }
  if (Status st = nccl_check(nccl, nccl.comm_init_rank(&g->state_->comm, g->size_, id, g->rank_),
                             "ncclCommInitRank");
      !st) {
    return st.error_value();
  }
  return g;
}

NcclGroup::~NcclGroup() {
  if (!state_) return;
  if (state_->comm) state_->nccl->comm_destroy(state_->comm);
  if (state_->stream) cudaStreamDestroy(state_->stream);
}

Status NcclGroup::all_gather(const void* send, size_t bytes, void* recv) {
  if (Status st = cuda_check(cudaSetDevice(state_->device), "cudaSetDevice"); !st) return st;
  if (Status st = nccl_check(*state_->nccl,
                             state_->nccl->all_gather(send, recv, bytes, ncclUint8, state_->comm,
                                                      state_->stream),
                             "ncclAllGather");
      !st) {
    return st;
  }
  return cuda_check(cudaStreamSynchronize(state_->stream), "cudaStreamSynchronize");
}

#else  // no NCCL in this build

struct NcclGroup::State {};

bool nccl_built() { return false; }

Result<std::unique_ptr<NcclGroup>> NcclGroup::create(Communicator&, int) {
  return Error("this build has no NCCL (built without the CUDA toolkit's nccl.h / libnccl)");
}

NcclGroup::~NcclGroup() = default;

Status NcclGroup::all_gather(const void*, size_t, void*) {
  return Error("this build has no NCCL");
}

#endif

}  // namespace cadenza::dist
