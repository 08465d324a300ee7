// CUDA matmul kernels with the batch-invariant numerics of cuda_kernels.h: the K elements of a
// row are read in groups of 8; lane l of a warp owns groups l, l+32, l+64, ... and accumulates them
// with an fma chain (groups in order, elements in order); the 32 lane partials are summed by a
// fixed xor butterfly. Loads are coalesced: a warp reads 32 consecutive groups (256 elements) of a
// weight row per step.
//  - gemv_kernel: a warp per weight row and NT tokens (decode, and the per-slot expert matmul).
//  - gemm_kernel: a warp per 4 weight rows x 8 tokens, 4 warps per block (prefill); the same
//    per-output arithmetic, so a row's result does not depend on which kernel ran.
// Plus the helpers of the cuBLAS path: weight rows decoded to bf16/f16 and activations converted.
#include <algorithm>

#include "kernels/cuda/matmul_common.cuh"

namespace cadenza::kernels::cuda {

namespace {

constexpr int kGemvWarps = 4;
constexpr int kGemvMaxTokens = 8;  // above this, the GEMM kernel
constexpr int kGemmRows = 4, kGemmTokens = 8, kGemmWarps = 4;

// x[k0 .. k0+7] of one activation row (elements at or past k are 0).
__device__ __forceinline__ void load_x8(const float* row, int64_t k0, int64_t k, bool vec,
                                        float out[8]) {
  if (vec && k0 + 8 <= k) {
    const float4 a = *reinterpret_cast<const float4*>(row + k0);
    const float4 b = *reinterpret_cast<const float4*>(row + k0 + 4);
    out[0] = a.x; out[1] = a.y; out[2] = a.z; out[3] = a.w;
    out[4] = b.x; out[5] = b.y; out[6] = b.z; out[7] = b.w;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i] = k0 + i < k ? row[k0 + i] : 0.0f;
  }
}

// acc = fma chain over the elements of one group that lie before k.
__device__ __forceinline__ float fma8(const float w[8], const float x[8], int64_t k0, int64_t k,
                                      float acc) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if (k0 + i < k) acc = __fmaf_rn(w[i], x[i], acc);
  }
  return acc;
}

// The fixed butterfly: every lane ends with the same bits (each step adds the same two values).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

template <int NT, bool kExperts>
__global__ void __launch_bounds__(kGemvWarps * 32)
gemv_kernel(DevWeight w, DevMat x, DevMat y, DevIdx expert_ids, bool x_per_slot, bool x_vec,
            int64_t t_base) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  const int64_t k = w.cols;
  const int64_t groups = (k + 7) / 8;
  const int64_t t0 = t_base + static_cast<int64_t>(blockIdx.y) * NT;
  const int nt = static_cast<int>(min(static_cast<int64_t>(NT), y.rows - t0));
  if (row >= w.rows || nt <= 0) return;  // uniform per warp

  int64_t matrix = 0;
  const float* xrow[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const int64_t yr = t0 + min(t, nt - 1);
    int64_t xr = yr;
    if constexpr (kExperts) {
      matrix = expert_ids.data[yr];  // NT == 1: one (token, slot) pair per warp
      xr = x_per_slot ? yr : yr / expert_ids.cols;
    }
    xrow[t] = x.data + xr * x.stride;
  }
  if constexpr (kExperts) {
    if (matrix < 0) {  // an expert another rank holds (expert parallelism): a zero row
      if (lane == 0) y.data[t0 * y.stride + row] = 0.0f;
      return;
    }
  }
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
#pragma unroll 4
  for (int64_t g = lane; g < groups; g += 32) {  // unrolled: several weight loads in flight
    float wv[8];
    decode8(w, matrix, row, g * 8, wv);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t < nt) {
        float xv[8];
        load_x8(xrow[t], g * 8, k, x_vec, xv);
        acc[t] = fma8(wv, xv, g * 8, k, acc[t]);
      }
    }
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const float total = warp_sum(acc[t]);
    if (lane == 0 && t < nt) y.data[(t0 + t) * y.stride + row] = total;
  }
}

__global__ void __launch_bounds__(kGemmWarps * 32)
gemm_kernel(DevWeight w, DevMat x, DevMat y, bool x_vec) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kGemmWarps + warp) * kGemmRows;
  const int64_t tok0 = static_cast<int64_t>(blockIdx.y) * kGemmTokens;
  const int64_t m = w.rows, k = w.cols, n = x.rows;
  if (row0 >= m) return;  // uniform per warp
  const int64_t groups = (k + 7) / 8;
  float acc[kGemmRows][kGemmTokens];
#pragma unroll
  for (int r = 0; r < kGemmRows; ++r)
#pragma unroll
    for (int t = 0; t < kGemmTokens; ++t) acc[r][t] = 0.0f;
  for (int64_t g = lane; g < groups; g += 32) {
    float wv[kGemmRows][8];
#pragma unroll
    for (int r = 0; r < kGemmRows; ++r) {
      if (row0 + r < m) {
        decode8(w, 0, row0 + r, g * 8, wv[r]);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) wv[r][i] = 0.0f;
      }
    }
#pragma unroll
    for (int t = 0; t < kGemmTokens; ++t) {
      if (tok0 + t < n) {
        float xv[8];
        load_x8(x.data + (tok0 + t) * x.stride, g * 8, k, x_vec, xv);
#pragma unroll
        for (int r = 0; r < kGemmRows; ++r) acc[r][t] = fma8(wv[r], xv, g * 8, k, acc[r][t]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kGemmRows; ++r) {
#pragma unroll
    for (int t = 0; t < kGemmTokens; ++t) {
      const float total = warp_sum(acc[r][t]);
      if (lane == 0 && row0 + r < m && tok0 + t < n) y.data[(tok0 + t) * y.stride + row0 + r] = total;
    }
  }
}

__global__ void dequantize_kernel(DevWeight w, int64_t matrix, int64_t r0, int64_t n_rows,
                                  void* out, bool to_f16) {
  const int64_t groups = (w.cols + 7) / 8;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= groups * n_rows) return;
  const int64_t r = g / groups, k0 = (g % groups) * 8;
  float v[8];
  decode8(w, matrix, r0 + r, k0, v);
  const int cnt = static_cast<int>(min(static_cast<int64_t>(8), w.cols - k0));
  for (int i = 0; i < cnt; ++i) {
    const int64_t idx = r * w.cols + k0 + i;
    if (to_f16) {
      static_cast<__half*>(out)[idx] = __float2half_rn(v[i]);
    } else {
      static_cast<__nv_bfloat16*>(out)[idx] = __float2bfloat16_rn(v[i]);
    }
  }
}

__global__ void convert_kernel(DevMat x, void* out, bool to_f16) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= x.rows * x.cols) return;
  const int64_t r = i / x.cols, c = i % x.cols;
  const float v = x.data[r * x.stride + c];
  if (to_f16) {
    static_cast<__half*>(out)[i] = __float2half_rn(v);
  } else {
    static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v);
  }
}

unsigned blocks_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

bool x_vectorizable(DevMat x) {
  return x.stride % 4 == 0 && reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
}

template <int NT, bool kExperts>
void launch_gemv(const DevWeight& w, DevMat x, DevMat y, DevIdx ids, bool x_per_slot,
                 cudaStream_t stream) {
  // grid.y is limited to 65535: slices of output rows (expert pairs in long prefills).
  constexpr int64_t kMaxGridY = 65535;
  for (int64_t t_base = 0; t_base < y.rows; t_base += kMaxGridY * NT) {
    const int64_t groups = std::min(kMaxGridY, (y.rows - t_base + NT - 1) / NT);
    const dim3 grid(static_cast<unsigned>((w.rows + kGemvWarps - 1) / kGemvWarps),
                    static_cast<unsigned>(groups));
    gemv_kernel<NT, kExperts><<<grid, kGemvWarps * 32, 0, stream>>>(
        w, x, y, ids, x_per_slot, x_vectorizable(x), t_base);
  }
}

}  // namespace

void matmul_invariant(const DevWeight& w, DevMat x, DevMat y, cudaStream_t stream) {
  if (x.rows == 0) return;
  if (x.rows <= 4) {
    launch_gemv<4, false>(w, x, y, DevIdx{}, false, stream);
  } else if (x.rows <= kGemvMaxTokens) {
    launch_gemv<8, false>(w, x, y, DevIdx{}, false, stream);
  } else {
    constexpr int64_t kRowsPerBlock = kGemmRows * kGemmWarps;
    constexpr int64_t kMaxGridY = 65535;
    for (int64_t t_base = 0; t_base < x.rows; t_base += kMaxGridY * kGemmTokens) {
      const int64_t n = std::min(kMaxGridY * kGemmTokens, x.rows - t_base);
      const DevMat xs{x.data + t_base * x.stride, n, x.cols, x.stride};
      const DevMat ys{y.data + t_base * y.stride, n, y.cols, y.stride};
      const dim3 grid(static_cast<unsigned>((w.rows + kRowsPerBlock - 1) / kRowsPerBlock),
                      static_cast<unsigned>((n + kGemmTokens - 1) / kGemmTokens));
      gemm_kernel<<<grid, kGemmWarps * 32, 0, stream>>>(w, xs, ys, x_vectorizable(xs));
    }
  }
}

void matmul_experts(const DevWeight& w, DevMat x, DevIdx expert_ids, DevMat y,
                    cudaStream_t stream) {
  if (y.rows == 0) return;
  // x is [n*K][k] (one row per slot) or [n][k] (shared by a token's K slots); equal when K == 1.
  const bool x_per_slot = x.rows == y.rows;
  launch_gemv<1, true>(w, x, y, expert_ids, x_per_slot, stream);
}

void dequantize_rows(const DevWeight& w, int64_t matrix, int64_t r0, int64_t n_rows, void* out,
                     bool to_f16, cudaStream_t stream) {
  const int64_t groups = (w.cols + 7) / 8 * n_rows;
  if (groups == 0) return;
  dequantize_kernel<<<blocks_for(groups, 256), 256, 0, stream>>>(w, matrix, r0, n_rows, out, to_f16);
}

void convert_activations(DevMat x, void* out, bool to_f16, cudaStream_t stream) {
  const int64_t n = x.rows * x.cols;
  if (n == 0) return;
  convert_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, out, to_f16);
}

}  // namespace cadenza::kernels::cuda
