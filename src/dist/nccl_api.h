// The NCCL functions NcclGroup calls, bound at run time from libnccl (util/shared_library.h)
// instead of linked, so that a process never maps NCCL unless it joins an NCCL group (see
// kernels/cuda/cublas_api.h for why: a linked library costs every process its resident pages).
// Only in builds with nccl.h (CADENZA_HAS_NCCL).
//
// Thread-safety: nccl_api() may be called from any thread; the first call loads the library,
// every later one returns the same result.
#pragma once

#include <nccl.h>

#include "util/result.h"

namespace cadenza::dist {

struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
};

// libnccl.so.<NCCL_MAJOR>, searched as the dynamic loader does, then beside the libnccl found at
// build time. Errors name the library and what was missing.
Result<const NcclApi*> nccl_api();

}  // namespace cadenza::dist
