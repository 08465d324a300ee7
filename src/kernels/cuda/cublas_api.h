// The cuBLAS functions the CUDA backend calls, bound at run time from libcublas (util/
// shared_library.h) instead of linked: a process that never creates a CUDA backend never maps
// cuBLAS (about 144 MiB resident otherwise: docs/performance.md "Memory").
//
// The pointers have the types of cublas_v2.h's declarations, so calls through them are checked
// like direct calls. Thread-safety: cublas_api() may be called from any thread; the first call
// loads the library, every later one returns the same result.
#pragma once

#include <cublas_v2.h>

#include "util/result.h"

namespace cadenza::kernels::cuda {

// cublasGemmEx has a C++ overload (an inline wrapper taking the old cudaDataType compute type);
// this is the exported one. The static_cast in the assertion compiles only if it is declared so.
using CublasGemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                          int, int, int, const void*, const void*, cudaDataType,
                                          int, const void*, cudaDataType, int, const void*, void*,
                                          cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
static_assert(sizeof(static_cast<CublasGemmExFn>(&cublasGemmEx)) == sizeof(CublasGemmExFn));

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  CublasGemmExFn gemm_ex = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// libcublas.so.<the toolkit's major version>, searched as the dynamic loader does, then in the
// toolkit's library folder found at build time. Errors name the library and what was missing.
Result<const CublasApi*> cublas_api();

}  // namespace cadenza::kernels::cuda
