// Non-linear 4-bit types: IQ4_NL (32-element blocks), IQ4_XS (256-element super-blocks) and MXFP4
// (32-element OCP microscaling blocks). Layouts in blocks.h, value tables in iq_grids.h.
//
// Quantizers (our own):
//  - IQ4_NL / IQ4_XS: per 32 elements, 18 trial scales that map the largest-magnitude value onto
//    either end of the table (-127 or 113, +-4 steps of 3); for each, every element takes the
//    nearest table value and the scale is refitted by weighted least squares (weights |x| + the
//    group's RMS); the trial with the least weighted error wins, and its elements are re-picked
//    once against the refitted scale. IQ4_NL stores that scale in fp16 and re-picks against the
//    stored value; IQ4_XS quantizes the 8 sub-block scales to 6 bits signed against the largest
//    (which maps to -32), then re-picks every element against its decoded sub-block scale.
//  - MXFP4: the shared exponent is the smallest power of two that fits the block maximum into
//    E2M1's +-6, or one below it (the largest values then clip to +-6) when that gives the smaller
//    squared error; each element takes the nearest E2M1 value (ties to the even code).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensor/iq_grids.h"
#include "tensor/quant.h"
#include "tensor/quant_impl.h"

namespace cadenza::quant_detail {
namespace {

using iq::kIq4nlValues;
using iq::kMxfp4Values;

// Code (0..15) of the kIq4nlValues entry nearest v (the table is increasing; ties go to the
// lower entry).
int nearest_nl(float v) {
  int lo = 0, hi = 15;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    const float threshold = 0.5f * (static_cast<float>(kIq4nlValues[mid]) +
                                    static_cast<float>(kIq4nlValues[mid + 1]));
    if (v > threshold)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// Best signed scale for n <= 32 values against the IQ4_NL table (see the file comment), codes to
// q. Returns 0 for an all-zero group (the codes are then irrelevant).
float fit_nl(int n, const float* x, uint8_t* q) {
  float amax = 0.0f, max = 0.0f, sum_x2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    sum_x2 += x[i] * x[i];
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < 1e-15f) {
    std::memset(q, 8, static_cast<size_t>(n));
    return 0.0f;
  }
  float w[kQK];
  const float av = std::sqrt(sum_x2 / static_cast<float>(n));
  for (int i = 0; i < n; ++i) w[i] = av + std::fabs(x[i]);
  float best_gain = -1.0f, best_scale = 0.0f;
  for (int end = 0; end < 2; ++end) {
    const float target = end == 0 ? -127.0f : 113.0f;
    for (int t = -4; t <= 4; ++t) {
      const float iscale = (target + 3.0f * static_cast<float>(t)) / max;
      float sxk = 0.0f, skk = 0.0f;
      for (int i = 0; i < n; ++i) {
        const float k = kIq4nlValues[nearest_nl(iscale * x[i])];
        sxk += w[i] * x[i] * k;
        skk += w[i] * k * k;
      }
      // Weighted error after the refit is sum w x^2 - sxk^2 / skk: maximise sxk^2 / skk.
      if (skk > 0.0f && sxk * sxk > best_gain * skk) {
        best_gain = sxk * sxk / skk;
        best_scale = sxk / skk;
      }
    }
  }
  if (best_scale == 0.0f) {
    std::memset(q, 8, static_cast<size_t>(n));
    return 0.0f;
  }
  // One more pass against the refitted scale.
  float sxk = 0.0f, skk = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float k = kIq4nlValues[nearest_nl(x[i] / best_scale)];
    sxk += w[i] * x[i] * k;
    skk += w[i] * k * k;
  }
  if (skk > 0.0f && sxk * sxk >= best_gain * skk) best_scale = sxk / skk;
  for (int i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(nearest_nl(x[i] / best_scale));
  return best_scale;
}

// Codes of n values against the decoded scale d (d == 0: every code decodes to 0).
void pick_nl(int n, const float* x, float d, uint8_t* q) {
  for (int i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(d != 0.0f ? nearest_nl(x[i] / d) : 8);
}

// Q4_0 nibble order: element l low nibble of qs[l], element l + 16 high nibble.
void pack_nibbles32(const uint8_t* q, uint8_t* qs) {
  for (int l = 0; l < 16; ++l) qs[l] = static_cast<uint8_t>(q[l] | (q[l + 16] << 4));
}

// E2M1 magnitude code (0..7) nearest v >= 0: values 0, .5, 1, 1.5, 2, 3, 4, 6, ties to even.
int nearest_e2m1(float v) {
  static constexpr float kMid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  int c = 0;
  while (c < 7 && v > kMid[c]) ++c;
  if (c < 7 && v == kMid[c] && (c & 1)) ++c;  // exactly halfway: take the even neighbour
  return c;
}

// MXFP4 codes of 32 values under exponent e; returns the squared error.
double mxfp4_codes(const float* x, int e, uint8_t* q) {
  double err = 0.0;
  for (int i = 0; i < kQK; ++i) {
    const int mag = nearest_e2m1(std::ldexp(std::fabs(x[i]), 127 - e));
    q[i] = static_cast<uint8_t>(mag == 0 ? 0 : (mag | (x[i] < 0.0f ? 8 : 0)));
    const double y = std::ldexp(static_cast<double>(kMxfp4Values[q[i]]), e - 128);
    err += (x[i] - y) * (x[i] - y);
  }
  return err;
}

}  // namespace

void dequantize_iq4_nl(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockIQ4_NL>(src, i);
    const float d = fp16_to_fp32(b.d);
    float* y = dst + i * kQK;
    for (int l = 0; l < 16; ++l) {
      y[l] = d * static_cast<float>(kIq4nlValues[b.qs[l] & 0xF]);
      y[l + 16] = d * static_cast<float>(kIq4nlValues[b.qs[l] >> 4]);
    }
  }
}

void dequantize_iq4_xs(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockIQ4_XS>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < 8; ++j) {
      const int ls = ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b.scales_h >> (2 * j)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* qs = b.qs + 16 * j;
      float* y = dst + i * kQK_K + 32 * j;
      for (int l = 0; l < 16; ++l) {
        y[l] = dl * static_cast<float>(kIq4nlValues[qs[l] & 0xF]);
        y[l + 16] = dl * static_cast<float>(kIq4nlValues[qs[l] >> 4]);
      }
    }
  }
}

void dequantize_mxfp4(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockMXFP4>(src, i);
    const float d = std::ldexp(1.0f, b.e - 128);  // half the E8M0 scale; exact, subnormal at e < 2
    float* y = dst + i * kQK;
    for (int l = 0; l < 16; ++l) {
      y[l] = static_cast<float>(kMxfp4Values[b.qs[l] & 0xF]) * d;
      y[l + 16] = static_cast<float>(kMxfp4Values[b.qs[l] >> 4]) * d;
    }
  }
}

void quantize_iq4_nl(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    BlockIQ4_NL b{};
    uint8_t q[kQK];
    b.d = fp32_to_fp16(fit_nl(kQK, x, q));
    pick_nl(kQK, x, fp16_to_fp32(b.d), q);
    pack_nibbles32(q, b.qs);
    store_block(dst, i, b);
  }
}

void quantize_iq4_xs(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK_K;
    BlockIQ4_XS b{};
    uint8_t q[kQK_K];
    float scales[8];
    float max_scale = 0.0f, max_abs = 0.0f;
    for (int j = 0; j < 8; ++j) {
      scales[j] = fit_nl(32, x + 32 * j, q + 32 * j);
      if (std::fabs(scales[j]) > max_abs) {
        max_abs = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    const float iscale = max_abs > 0.0f ? -32.0f / max_scale : 0.0f;
    b.d = fp32_to_fp16(max_abs > 0.0f ? 1.0f / iscale : 0.0f);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < 8; ++j) {
      const int ls = round_clamp(iscale * scales[j], -32, 31) + 32;
      b.scales_l[j / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (j % 2)));
      b.scales_h = static_cast<uint16_t>(b.scales_h | ((ls >> 4) << (2 * j)));
      pick_nl(32, x + 32 * j, d * static_cast<float>(ls - 32), q + 32 * j);
      pack_nibbles32(q + 32 * j, b.qs + 16 * j);
    }
    store_block(dst, i, b);
  }
}

void quantize_mxfp4(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    BlockMXFP4 b{};
    double amax = 0.0;
    for (int l = 0; l < kQK; ++l) amax = std::max(amax, static_cast<double>(std::fabs(x[l])));
    // Smallest e in 0..254 with amax <= 6 * 2^(e - 127) (double: no overflow at e = 254).
    int e = 0;
    if (amax > 0.0) {
      e = std::clamp(127 + std::ilogb(amax) - 2, 0, 254);
      while (e < 254 && amax > std::ldexp(6.0, e - 127)) ++e;
      while (e > 0 && amax <= std::ldexp(6.0, e - 128)) --e;
    }
    uint8_t q[kQK], q_lower[kQK];
    const double err = mxfp4_codes(x, e, q);
    if (e > 0 && mxfp4_codes(x, e - 1, q_lower) < err) {
      --e;
      std::memcpy(q, q_lower, sizeof q);
    }
    b.e = static_cast<uint8_t>(e);
    pack_nibbles32(q, b.qs);
    store_block(dst, i, b);
  }
}

}  // namespace cadenza::quant_detail
