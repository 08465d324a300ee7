// The CUDA backend: the Backend seam (kernels/backend.h) on one NVIDIA GPU. Built only when CMake
// finds the CUDA toolkit (CADENZA_WITH_CUDA); see README.md here and docs/cuda.md.
//
// Memory: buffers, weights and the KV cache live in device memory (cudaMalloc). Weights keep
// their file type where a kernel decodes it (F32, F16, BF16, Q8_0 split into quants and scales,
// Q4_K); other types are dequantized to F32 at upload (logged). Vectors are stored as F32.
// Ops are queued on one CUDA stream in call order; read() waits for them.
// Thread-safety: like every Backend, one thread issues ops at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "util/result.h"

namespace cadenza::kernels {

struct CudaBackendOptions {
  int device = 0;  // CUDA device ordinal
  // Matmuls of more than 8 rows through cuBLAS (bf16/f16 tensor cores; weights of other types
  // decoded to bf16 tile by tile) instead of the batch-invariant tiled kernel. Faster prefill, but
  // a row's result then depends on the number of rows in the call. The environment variable
  // CADENZA_CUDA_GEMM=cublas|invariant overrides this.
  bool cublas_gemm = false;
};

// What make_cuda_backend reports about the device (also logged at start).
struct CudaDeviceInfo {
  std::string name;
  int ordinal = 0;
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
  size_t total_bytes = 0, free_bytes = 0;
};

// Number of CUDA devices; 0 when there is no driver or no device (never fails).
int cuda_device_count();

// Errors: "no CUDA device" (with the runtime's reason), an ordinal out of range, a context or
// cuBLAS initialisation failure.
Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options = {});

// The device of a backend made by make_cuda_backend (nullptr for any other backend).
const CudaDeviceInfo* cuda_device_info(const Backend& backend);

}  // namespace cadenza::kernels
