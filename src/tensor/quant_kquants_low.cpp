// The low-bit K-quants Q2_K and Q3_K: 256-element super-blocks of 16 sub-blocks of 16 (layouts
// in blocks.h).
//
// Quantizers (our own, in the style of quant_kquants.cpp):
//  - Q2_K: per sub-block a weighted least-squares (scale, min) fit onto q in 0..3 over 16 trial
//    scales (fit_scale_min, weights |x| + the sub-block RMS); scales and mins quantized to 4 bits
//    against their super-block maxima; every element re-quantized with the decoded scale and min,
//    then each sub-block's 4-bit scale/min pair is nudged by +-1 where that lowers its error.
//  - Q3_K: per sub-block a symmetric least-squares fit onto q in -4..3 over 19 trial scales
//    (fit_scale_symmetric); scales quantized to 6 bits signed (-32..31) against the
//    super-block's largest; elements re-quantized with the decoded scale.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensor/quant.h"
#include "tensor/quant_impl.h"

namespace cadenza::quant_detail {
namespace {

constexpr int kSub = kQK_K / 16;  // 16-element sub-blocks per super-block

// Element e (0..255) of Q2_K/Q3_K's 2-bit plane: byte and shift in qs (blocks.h).
inline int plane_byte(int e) { return 32 * (e / 128) + e % 32; }
inline int plane_shift(int e) { return 2 * ((e % 128) / 32); }

// Stores sub-block j's 6-bit scale (0..63) into Q3_K's packed bytes (zeroed beforehand).
void pack_scale_q3(uint8_t* scales, int j, int ls) {
  if (j < 8)
    scales[j] |= static_cast<uint8_t>(ls & 0xF);
  else
    scales[j - 8] |= static_cast<uint8_t>((ls & 0xF) << 4);
  scales[8 + j % 4] |= static_cast<uint8_t>((ls >> 4) << (2 * (j / 4)));
}

// Squared error of sub-block x[0..15] decoded as dl * q - ml with the best q in 0..3; the chosen
// quants go to L.
float q2_error(const float* x, const float* w, float dl, float ml, uint8_t* L) {
  float err = 0.0f;
  for (int l = 0; l < 16; ++l) {
    const int q = dl > 0.0f ? round_clamp((x[l] + ml) / dl, 0, 3) : 0;
    L[l] = static_cast<uint8_t>(q);
    const float diff = dl * static_cast<float>(q) - ml - x[l];
    err += w[l] * diff * diff;
  }
  return err;
}

}  // namespace

void dequantize_q2_K(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ2_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    float* y = dst + i * kQK_K;
    for (int e = 0; e < kQK_K; ++e) {
      const int j = e / 16;
      const float dl = d * static_cast<float>(b.scales[j] & 0xF);
      const float ml = dmin * static_cast<float>(b.scales[j] >> 4);
      const int q = (b.qs[plane_byte(e)] >> plane_shift(e)) & 3;
      y[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

void dequantize_q3_K(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ3_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    float* y = dst + i * kQK_K;
    for (int j = 0; j < kSub; ++j) {
      const float dl = d * static_cast<float>(unpack_scale_q3_k(j, b.scales) - 32);
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        const int low = (b.qs[plane_byte(e)] >> plane_shift(e)) & 3;
        const int high = (b.hmask[e % 32] >> (e / 32)) & 1;
        y[e] = dl * static_cast<float>(low - (high ? 0 : 4));
      }
    }
  }
}

void quantize_q2_K(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK_K;
    BlockQ2_K b{};
    uint8_t L[kQK_K];
    uint8_t aux[16];
    float w[kQK_K];
    float scales[kSub], mins[kSub];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < kSub; ++j) {
      const float* xs = x + 16 * j;
      float sum_x2 = 0.0f;
      for (int l = 0; l < 16; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 16.0f);
      for (int l = 0; l < 16; ++l) w[16 * j + l] = av_x + std::fabs(xs[l]);
      scales[j] = fit_scale_min(16, 3, xs, w + 16 * j, L + 16 * j, aux, &mins[j], -0.5f, 0.1f, 15);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    b.d = fp32_to_fp16(max_scale / 15.0f);
    b.dmin = fp32_to_fp16(max_min / 15.0f);
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    const float inv_d = d > 0.0f ? 1.0f / d : 0.0f;
    const float inv_m = dmin > 0.0f ? 1.0f / dmin : 0.0f;
    for (int j = 0; j < kSub; ++j) {
      const float* xs = x + 16 * j;
      const int ls0 = round_clamp(scales[j] * inv_d, 0, 15);
      const int lm0 = round_clamp(mins[j] * inv_m, 0, 15);
      // The rounded pair and its neighbours: keep the one with the least error.
      int best_ls = ls0, best_lm = lm0;
      float best = q2_error(xs, w + 16 * j, d * static_cast<float>(ls0),
                            dmin * static_cast<float>(lm0), L + 16 * j);
      for (int ls = std::max(0, ls0 - 1); ls <= std::min(15, ls0 + 1); ++ls) {
        for (int lm = std::max(0, lm0 - 1); lm <= std::min(15, lm0 + 1); ++lm) {
          if (ls == ls0 && lm == lm0) continue;
          const float err = q2_error(xs, w + 16 * j, d * static_cast<float>(ls),
                                     dmin * static_cast<float>(lm), aux);
          if (err < best) {
            best = err;
            best_ls = ls;
            best_lm = lm;
            std::memcpy(L + 16 * j, aux, 16);
          }
        }
      }
      b.scales[j] = static_cast<uint8_t>(best_ls | (best_lm << 4));
    }
    for (int e = 0; e < kQK_K; ++e)
      b.qs[plane_byte(e)] |= static_cast<uint8_t>(L[e] << plane_shift(e));
    store_block(dst, i, b);
  }
}

void quantize_q3_K(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK_K;
    BlockQ3_K b{};
    uint8_t L[kQK_K];  // q + 4, 0..7
    float scales[kSub];
    float max_scale = 0.0f, max_abs = 0.0f;  // the signed scale of largest magnitude
    for (int j = 0; j < kSub; ++j) {
      scales[j] = fit_scale_symmetric(16, 4, x + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > max_abs) {
        max_abs = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    if (max_abs < 1e-15f) {  // all (near) zero: every scale 0 (stored as 32) decodes to 0
      for (int j = 0; j < kSub; ++j) pack_scale_q3(b.scales, j, 32);
      store_block(dst, i, b);
      continue;
    }
    // The largest scale maps to -32, so the 6-bit signed range is used fully (as Q6_K does).
    const float iscale = -32.0f / max_scale;
    b.d = fp32_to_fp16(1.0f / iscale);
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < kSub; ++j) {
      const int ls = round_clamp(iscale * scales[j], -32, 31) + 32;
      pack_scale_q3(b.scales, j, ls);
      const float dl = d * static_cast<float>(ls - 32);
      if (dl == 0.0f) continue;  // decodes to 0 whatever the quants
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<uint8_t>(round_clamp(x[16 * j + l] / dl, -4, 3) + 4);
    }
    for (int e = 0; e < kQK_K; ++e) {
      b.qs[plane_byte(e)] |= static_cast<uint8_t>((L[e] & 3) << plane_shift(e));
      b.hmask[e % 32] |= static_cast<uint8_t>((L[e] >> 2) << (e / 32));
    }
    store_block(dst, i, b);
  }
}

}  // namespace cadenza::quant_detail
