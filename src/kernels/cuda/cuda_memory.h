// Internal to the CUDA backend: device allocations with clear out-of-memory errors, and the
// weight storage (CudaWeight) with its host-side preparation (Q8_0 split, other types to F32).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "util/result.h"

namespace cadenza::kernels::cuda {

struct CudaFree {
  void operator()(void* p) const;
};
// Device memory freed with cudaFree.
using DevicePtr = std::unique_ptr<void, CudaFree>;

// "<what>: <runtime error name>: <description>".
std::string cuda_error_text(std::string_view what, cudaError_t err);

// Allocates `bytes` of device memory (not zeroed). Out of memory is an error naming `what`, the
// size and the device's free/total memory.
Result<DevicePtr> device_alloc(size_t bytes, std::string_view what);

// A weight in device memory. `dev` describes it to the kernels. Vectors (rows == matrices == 1)
// are stored as F32, so `vector_f32()` points at their values.
class CudaWeight final : public Weight {
 public:
  explicit CudaWeight(const WeightDesc& desc) : Weight(desc) {}
  DevWeight dev;
  DevicePtr data;
  DevicePtr scales;
  bool is_vector() const { return rows() == 1 && matrices() == 1; }
  const float* vector_f32() const { return static_cast<const float*>(dev.data); }
};

// Validates desc, converts it on the host where needed and copies it to the device (synchronous).
// Errors: unsupported type, empty or overflowing shape, out of device memory.
Result<std::unique_ptr<CudaWeight>> upload_weight(const WeightDesc& desc);

}  // namespace cadenza::kernels::cuda
