// Device helpers shared by the CUDA kernels: weight element decoding (decode8) and small
// conversions. Internal to src/kernels/cuda.
//
// decode8 is the single definition of "the f32 value of weight element (row, k)" used by every
// kernel (matmul, expert matmul, get_rows, dequantize_rows), so all of them agree bit for bit with
// each other and with the CPU backend's dequantize_row (same formulas, no fused multiply-adds:
// the library is compiled with --fmad=false).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"

namespace cadenza::kernels::cuda {

__device__ __forceinline__ float half_bits_to_float(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

__device__ __forceinline__ const uint8_t* matrix_base(const DevWeight& w, int64_t matrix) {
  return static_cast<const uint8_t*>(w.data) + static_cast<size_t>(matrix) * w.matrix_bytes;
}

// Q4_K sub-block j's 6-bit scale and min (tensor/blocks.h unpack_scale_min_k4).
__device__ __forceinline__ void q4k_scale_min(int j, const uint8_t* s, int* sc, int* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

__device__ __forceinline__ uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// The non-linear 4-bit code table of IQ4_NL / IQ4_XS (tensor/iq_grids.h kIq4nlValues).
__device__ __forceinline__ float iq4nl_value(int q) {
  const int8_t values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                             1,    13,   25,  38,  53,  69,  89,  113};
  return static_cast<float>(values[q]);
}
// Twice the FP4 E2M1 value of a code (tensor/iq_grids.h kMxfp4Values).
__device__ __forceinline__ float mxfp4_value(int q) {
  const int8_t values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  return static_cast<float>(values[q]);
}
// 2^(e - 128), exactly (subnormal for e < 2), from the bits: half the E8M0 scale.
__device__ __forceinline__ float mxfp4_half_scale(int e) {
  return e >= 2 ? __uint_as_float(static_cast<uint32_t>(e - 1) << 23)
                : __uint_as_float(0x00400000u >> (1 - e));
}

// Elements k0 .. k0+7 of row `row` of matrix `matrix` into out[0..8). k0 % 8 == 0. Elements at or
// past w.cols are 0 (only F32/F16/BF16 rows can end inside a group of 8).
__device__ __forceinline__ void decode8(const DevWeight& w, int64_t matrix, int64_t row, int64_t k0,
                                        float out[8]) {
  const uint8_t* base = matrix_base(w, matrix) + static_cast<size_t>(row) * w.row_bytes;
  const int64_t k = w.cols;
  const bool full = k0 + 8 <= k && (k % 8) == 0;
  switch (w.type) {
    case WType::F32: {
      const float* p = reinterpret_cast<const float*>(base) + k0;
      if (full) {
        const float4 a = *reinterpret_cast<const float4*>(p);
        const float4 b = *reinterpret_cast<const float4*>(p + 4);
        out[0] = a.x; out[1] = a.y; out[2] = a.z; out[3] = a.w;
        out[4] = b.x; out[5] = b.y; out[6] = b.z; out[7] = b.w;
      } else {
        for (int i = 0; i < 8; ++i) out[i] = k0 + i < k ? p[i] : 0.0f;
      }
      return;
    }
    case WType::F16:
    case WType::BF16: {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(base) + k0;
      uint16_t h[8];
      if (full) {
        const uint4 v = *reinterpret_cast<const uint4*>(p);
        const uint32_t words[4] = {v.x, v.y, v.z, v.w};
        for (int i = 0; i < 4; ++i) {
          h[2 * i] = static_cast<uint16_t>(words[i] & 0xFFFF);
          h[2 * i + 1] = static_cast<uint16_t>(words[i] >> 16);
        }
      } else {
        for (int i = 0; i < 8; ++i) h[i] = k0 + i < k ? p[i] : 0;
      }
      const bool f16 = w.type == WType::F16;
      for (int i = 0; i < 8; ++i) out[i] = f16 ? half_bits_to_float(h[i]) : bf16_bits_to_float(h[i]);
      return;
    }
    case WType::Q8_0: {
      const int8_t* q = reinterpret_cast<const int8_t*>(base) + k0;
      const uint16_t* scales = static_cast<const uint16_t*>(w.scales) +
                               (static_cast<size_t>(matrix) * w.rows + row) * (k / 32);
      const float d = half_bits_to_float(scales[k0 / 32]);
      const int2 v = *reinterpret_cast<const int2*>(q);
      const uint32_t words[2] = {static_cast<uint32_t>(v.x), static_cast<uint32_t>(v.y)};
      for (int i = 0; i < 8; ++i) {
        const int8_t qi = static_cast<int8_t>((words[i / 4] >> (8 * (i % 4))) & 0xFF);
        out[i] = d * static_cast<float>(qi);
      }
      return;
    }
    case WType::Q4_K: {
      const uint8_t* block = base + static_cast<size_t>(k0 / 256) * 144;
      const int within = static_cast<int>(k0 % 256);
      const int c = within / 64, off = within % 64;
      const bool high = off >= 32;
      const int l = off % 32;
      int sc, mn;
      q4k_scale_min(2 * c + (high ? 1 : 0), block + 4, &sc, &mn);
      const float d = half_bits_to_float(static_cast<uint16_t>(block[0] | (block[1] << 8)));
      const float dmin = half_bits_to_float(static_cast<uint16_t>(block[2] | (block[3] << 8)));
      const float d0 = d * static_cast<float>(sc);
      const float m0 = dmin * static_cast<float>(mn);
      const uint2 v = *reinterpret_cast<const uint2*>(block + 16 + 32 * c + l);
      const uint32_t words[2] = {v.x, v.y};
      for (int i = 0; i < 8; ++i) {
        const uint32_t byte = (words[i / 4] >> (8 * (i % 4))) & 0xFF;
        const uint32_t q = high ? (byte >> 4) : (byte & 0xF);
        out[i] = d0 * static_cast<float>(q) - m0;
      }
      return;
    }
    // The low-bit types: the formulas of tensor/quant_kquants_low.cpp and quant_nl.cpp, in their
    // order (bit for bit the CPU's dequantize_row).
    case WType::Q2_K: {
      const uint8_t* block = base + static_cast<size_t>(k0 / 256) * 84;
      const float d = half_bits_to_float(load_u16(block + 80));
      const float dmin = half_bits_to_float(load_u16(block + 82));
      for (int i = 0; i < 8; ++i) {
        const int e = static_cast<int>(k0 % 256) + i;
        const int sc = block[e / 16];
        const float dl = d * static_cast<float>(sc & 0xF);
        const float ml = dmin * static_cast<float>(sc >> 4);
        const int q = (block[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        out[i] = dl * static_cast<float>(q) - ml;
      }
      return;
    }
    case WType::Q3_K: {
      const uint8_t* block = base + static_cast<size_t>(k0 / 256) * 110;
      const uint8_t* scales = block + 96;
      const float d = half_bits_to_float(load_u16(block + 108));
      for (int i = 0; i < 8; ++i) {
        const int e = static_cast<int>(k0 % 256) + i;
        const int j = e / 16;
        const int lo = j < 8 ? (scales[j] & 0xF) : (scales[j - 8] >> 4);
        const int hi = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        const float dl = d * static_cast<float>((lo | (hi << 4)) - 32);
        const int low = (block[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        const int high = (block[e % 32] >> (e / 32)) & 1;
        out[i] = dl * static_cast<float>(low - (high ? 0 : 4));
      }
      return;
    }
    case WType::IQ4_XS: {
      const uint8_t* block = base + static_cast<size_t>(k0 / 256) * 136;
      const float d = half_bits_to_float(load_u16(block));
      const int scales_h = load_u16(block + 2);
      const int within = static_cast<int>(k0 % 256);
      const int j = within / 32;
      const int ls = ((block[4 + j / 2] >> (4 * (j % 2))) & 0xF) | (((scales_h >> (2 * j)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      for (int i = 0; i < 8; ++i) {
        const int l = (within + i) % 32;
        const uint8_t byte = block[8 + 16 * j + l % 16];
        out[i] = dl * iq4nl_value(l < 16 ? (byte & 0xF) : (byte >> 4));
      }
      return;
    }
    case WType::MXFP4: {
      const uint8_t* block = base + static_cast<size_t>(k0 / 32) * 17;
      const float d = mxfp4_half_scale(block[0]);
      for (int i = 0; i < 8; ++i) {
        const int l = static_cast<int>(k0 % 32) + i;
        const uint8_t byte = block[1 + l % 16];
        out[i] = mxfp4_value(l < 16 ? (byte & 0xF) : (byte >> 4)) * d;
      }
      return;
    }
  }
}

}  // namespace cadenza::kernels::cuda
