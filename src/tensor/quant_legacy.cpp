// The 32-element block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 (layouts in blocks.h).
//
// Quantizers follow the reference *_ref algorithms: one pass for the scale, one for the quants,
// with the reference's rounding quirks kept (Q4/Q5 truncate x + 0.5 where the value is known to
// be >= 0, Q8 rounds half away from zero) so files we write match those written by llama.cpp's
// tools. The scale is rounded to fp16 for storage but the quants are computed with the unrounded
// scale, as the reference does.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tensor/quant.h"
#include "tensor/quant_impl.h"

namespace cadenza::quant_detail {
namespace {

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, sizeof v); }

// The signed value of largest magnitude (first one on ties) and that magnitude.
void signed_absmax(const float* x, int n, float* max, float* amax) {
  *amax = 0.0f;
  *max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (*amax < std::fabs(x[j])) {
      *amax = std::fabs(x[j]);
      *max = x[j];
    }
  }
}

void min_max(const float* x, int n, float* min, float* max) {
  *min = x[0];
  *max = x[0];
  for (int j = 1; j < n; ++j) {
    *min = std::min(*min, x[j]);
    *max = std::max(*max, x[j]);
  }
}

// roundf (half away from zero) into [-127, 127]; NaN -> 0.
int8_t round_q8(float v) {
  if (std::isnan(v)) return 0;
  return static_cast<int8_t>(std::clamp(std::round(v), -127.0f, 127.0f));
}

}  // namespace

void dequantize_q4_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ4_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b.qs[j] & 0xF) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ4_1>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float m = fp16_to_fp32(b.m);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(b.qs[j] & 0xF) * d + m;
      y[j + kQK / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ5_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    const uint32_t qh = load_u32(b.qh);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      y[j] = static_cast<float>(((b.qs[j] & 0xF) | hi0) - 16) * d;
      y[j + kQK / 2] = static_cast<float>(((b.qs[j] >> 4) | hi1) - 16) * d;
    }
  }
}

void dequantize_q5_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ5_1>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float m = fp16_to_fp32(b.m);
    const uint32_t qh = load_u32(b.qh);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      y[j] = static_cast<float>((b.qs[j] & 0xF) | hi0) * d + m;
      y[j + kQK / 2] = static_cast<float>((b.qs[j] >> 4) | hi1) * d + m;
    }
  }
}

void dequantize_q8_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ8_0>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = static_cast<float>(b.qs[j]) * d;
  }
}

void dequantize_q8_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ8_1>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = static_cast<float>(b.qs[j]) * d;
  }
}

// Symmetric 4-bit: the largest-magnitude value maps exactly to -8 (d = max / -8 keeps its sign),
// which uses the asymmetric range -8..7 fully on that side.
void quantize_q4_0(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    float max, amax;
    signed_absmax(x, kQK, &max, &amax);
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0 b{};
    b.d = fp32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = trunc_clamp(x[j] * id + 8.5f, 15);
      const int q1 = trunc_clamp(x[j + kQK / 2] * id + 8.5f, 15);
      b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
    store_block(dst, i, b);
  }
}

void quantize_q4_1(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    float min, max;
    min_max(x, kQK, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_1 b{};
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = trunc_clamp((x[j] - min) * id + 0.5f, 15);
      const int q1 = trunc_clamp((x[j + kQK / 2] - min) * id + 0.5f, 15);
      b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
    store_block(dst, i, b);
  }
}

void quantize_q5_0(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    float max, amax;
    signed_absmax(x, kQK, &max, &amax);
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_0 b{};
    b.d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = trunc_clamp(x[j] * id + 16.5f, 31);
      const int q1 = trunc_clamp(x[j + kQK / 2] * id + 16.5f, 31);
      b.qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
    }
    store_u32(b.qh, qh);
    store_block(dst, i, b);
  }
}

void quantize_q5_1(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    float min, max;
    min_max(x, kQK, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ5_1 b{};
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = trunc_clamp((x[j] - min) * id + 0.5f, 31);
      const int q1 = trunc_clamp((x[j + kQK / 2] - min) * id + 0.5f, 31);
      b.qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
    }
    store_u32(b.qh, qh);
    store_block(dst, i, b);
  }
}

void quantize_q8_0(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    float max, amax;
    signed_absmax(x, kQK, &max, &amax);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 b{};
    b.d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) b.qs[j] = round_q8(x[j] * id);
    store_block(dst, i, b);
  }
}

void quantize_q8_1(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    float max, amax;
    signed_absmax(x, kQK, &max, &amax);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_1 b{};
    b.d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      b.qs[j] = round_q8(x[j] * id);
      sum += b.qs[j];
    }
    // With the unrounded d, like the reference: s is a correction term, not a decoded value.
    b.s = fp32_to_fp16(static_cast<float>(sum) * d);
    store_block(dst, i, b);
  }
}

}  // namespace cadenza::quant_detail
