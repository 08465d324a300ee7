// CUDA backend memory: device allocations and weight upload (see cuda_memory.h).
#include "kernels/cuda/cuda_memory.h"

#include <cstring>
#include <optional>
#include <limits>
#include <mutex>
#include <vector>

#include <spdlog/spdlog.h>

#include "tensor/blocks.h"
#include "tensor/quant.h"

namespace cadenza::kernels::cuda {

void CudaFree::operator()(void* p) const {
  if (p) cudaFree(p);
}

std::string cuda_error_text(std::string_view what, cudaError_t err) {
  return fmt::format("{}: {}: {}", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

Result<DevicePtr> device_alloc(size_t bytes, std::string_view what) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) allocation error
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    constexpr double kMiB = 1024.0 * 1024.0;
    if (err == cudaErrorMemoryAllocation) {
      return make_error(
          "cuda backend: out of GPU memory for {}: needs {:.1f} MiB, the device has {:.1f} MiB "
          "free of {:.1f} MiB (use a smaller model or type, or a smaller KV cache)",
          what, static_cast<double>(bytes) / kMiB, static_cast<double>(free_bytes) / kMiB,
          static_cast<double>(total_bytes) / kMiB);
    }
    return make_error("cuda backend: allocating {} bytes for {} failed: {}", bytes, what,
                      cuda_error_text("cudaMalloc", err));
  }
  return DevicePtr(p);
}

namespace {

Status copy_to_device(void* dst, const void* src, size_t bytes, std::string_view name) {
  const cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
  if (err != cudaSuccess) {
    return make_error("tensor '{}': {}", name, cuda_error_text("cudaMemcpy", err));
  }
  return {};
}

// Row `r` (0 .. rows*matrices) of the file data decoded to f32.
void decode_host_row(const WeightDesc& desc, size_t row_bytes, int64_t r, float* out) {
  const auto* src = static_cast<const uint8_t*>(desc.data) + static_cast<size_t>(r) * row_bytes;
  if (desc.type == DType::F32) {
    std::memcpy(out, src, static_cast<size_t>(desc.cols) * sizeof(float));
  } else {
    dequantize_row(desc.type, src, out, desc.cols);
  }
}

}  // namespace

Result<std::unique_ptr<CudaWeight>> upload_weight(const WeightDesc& desc) {
  const std::optional<DTypeTraits> traits = dtype_traits(static_cast<uint32_t>(desc.type));
  if (!traits || !traits->compute_supported) {
    return make_error("tensor '{}': type {} is not supported by the cuda backend", desc.name,
                      traits ? traits->name : "unknown");
  }
  if (desc.cols <= 0 || desc.rows <= 0 || desc.matrices <= 0) {
    return make_error("tensor '{}': empty shape", desc.name);
  }
  const std::optional<uint64_t> file_row = cadenza::row_bytes(desc.type, desc.cols);
  if (!file_row) {
    return make_error("tensor '{}': row of {} elements does not fit type {}", desc.name, desc.cols,
                      traits->name);
  }
  const uint64_t n_rows = static_cast<uint64_t>(desc.rows) * static_cast<uint64_t>(desc.matrices);
  // Bound for every layout below (F32 is the largest: 4 bytes per element).
  if (n_rows > std::numeric_limits<uint64_t>::max() / 8 / static_cast<uint64_t>(desc.cols)) {
    return make_error("tensor '{}': size overflows", desc.name);
  }
  const size_t row_bytes_file = static_cast<size_t>(*file_row);
  auto w = std::make_unique<CudaWeight>(desc);
  DevWeight& d = w->dev;
  d.rows = desc.rows;
  d.cols = desc.cols;
  d.matrices = desc.matrices;

  const bool vector = desc.rows == 1 && desc.matrices == 1;
  // Types the device decodes from the file's own bytes (matmul_common.cuh decode8).
  std::optional<WType> direct;
  switch (desc.type) {
    case DType::F32: direct = WType::F32; break;
    case DType::F16: direct = WType::F16; break;
    case DType::BF16: direct = WType::BF16; break;
    case DType::Q4_K: direct = WType::Q4_K; break;
    case DType::Q2_K: direct = WType::Q2_K; break;
    case DType::Q3_K: direct = WType::Q3_K; break;
    case DType::IQ4_XS: direct = WType::IQ4_XS; break;
    case DType::MXFP4: direct = WType::MXFP4; break;
    default: break;
  }
  if (!vector && direct) {
    d.type = *direct;
    d.row_bytes = row_bytes_file;
    d.matrix_bytes = row_bytes_file * static_cast<size_t>(desc.rows);
    const size_t total = d.matrix_bytes * static_cast<size_t>(desc.matrices);
    Result<DevicePtr> mem = device_alloc(total, fmt::format("tensor '{}'", desc.name));
    if (!mem) return mem.error_value();
    w->data = std::move(*mem);
    if (Status s = copy_to_device(w->data.get(), desc.data, total, desc.name); !s) return s.error_value();
  } else if (!vector && desc.type == DType::Q8_0) {
    // Split the 34-byte blocks into aligned quants [rows][cols] and fp16 scales [rows][cols/32].
    const int64_t blocks = desc.cols / kQK;
    std::vector<int8_t> quants(static_cast<size_t>(n_rows) * static_cast<size_t>(desc.cols));
    std::vector<uint16_t> scales(static_cast<size_t>(n_rows) * static_cast<size_t>(blocks));
    const auto* src = static_cast<const uint8_t*>(desc.data);
    for (uint64_t r = 0; r < n_rows; ++r) {
      for (int64_t b = 0; b < blocks; ++b) {
        BlockQ8_0 block;
        std::memcpy(&block, src + r * row_bytes_file + static_cast<size_t>(b) * sizeof(BlockQ8_0),
                    sizeof(block));
        scales[r * static_cast<uint64_t>(blocks) + static_cast<uint64_t>(b)] = block.d;
        std::memcpy(quants.data() + r * static_cast<uint64_t>(desc.cols) + static_cast<uint64_t>(b) * kQK,
                    block.qs, kQK);
      }
    }
    d.type = WType::Q8_0;
    d.row_bytes = static_cast<size_t>(desc.cols);
    d.matrix_bytes = d.row_bytes * static_cast<size_t>(desc.rows);
    Result<DevicePtr> q = device_alloc(quants.size(), fmt::format("tensor '{}' (quants)", desc.name));
    if (!q) return q.error_value();
    Result<DevicePtr> s = device_alloc(scales.size() * 2, fmt::format("tensor '{}' (scales)", desc.name));
    if (!s) return s.error_value();
    w->data = std::move(*q);
    w->scales = std::move(*s);
    d.scales = w->scales.get();
    if (Status st = copy_to_device(w->data.get(), quants.data(), quants.size(), desc.name); !st) {
      return st.error_value();
    }
    if (Status st = copy_to_device(w->scales.get(), scales.data(), scales.size() * 2, desc.name); !st) {
      return st.error_value();
    }
  } else {
    // Vectors, and types without a device decoder: f32 on the device.
    if (!vector) {
      static std::once_flag once;
      std::call_once(once, [&] {
        spdlog::warn("cuda backend: {} weights have no GPU kernel yet; they are dequantized to f32 "
                     "at load (more memory, slower; first: '{}')",
                     traits->name, desc.name);
      });
    }
    d.type = WType::F32;
    d.row_bytes = static_cast<size_t>(desc.cols) * sizeof(float);
    d.matrix_bytes = d.row_bytes * static_cast<size_t>(desc.rows);
    const size_t total = d.matrix_bytes * static_cast<size_t>(desc.matrices);
    Result<DevicePtr> mem = device_alloc(total, fmt::format("tensor '{}'", desc.name));
    if (!mem) return mem.error_value();
    w->data = std::move(*mem);
    // Convert and copy in slices of rows to bound the host temporary (~64 MiB).
    const int64_t slice = std::max<int64_t>(1, (64 << 20) / static_cast<int64_t>(d.row_bytes));
    std::vector<float> host;
    for (int64_t r0 = 0; r0 < static_cast<int64_t>(n_rows); r0 += slice) {
      const int64_t count = std::min<int64_t>(slice, static_cast<int64_t>(n_rows) - r0);
      host.resize(static_cast<size_t>(count * desc.cols));
      for (int64_t r = 0; r < count; ++r) {
        decode_host_row(desc, row_bytes_file, r0 + r, host.data() + r * desc.cols);
      }
      if (Status st = copy_to_device(static_cast<uint8_t*>(w->data.get()) + static_cast<size_t>(r0) * d.row_bytes,
                                     host.data(), host.size() * sizeof(float), desc.name);
          !st) {
        return st.error_value();
      }
    }
  }
  d.data = w->data.get();
  return w;
}

}  // namespace cadenza::kernels::cuda
