// K-quants: Q4_K, Q5_K, Q6_K (weights) and Q8_K (activations), 256-element super-blocks
// (layouts in blocks.h).
//
// Quantizers follow the reference *_ref algorithms: each sub-block gets a float scale (and min)
// from a small least-squares search, then the sub-block scales are themselves quantized against
// the super-block maximum (6 bits unsigned for Q4_K/Q5_K, 8 bits signed for Q6_K), and finally
// every element is re-quantized with the scale it will actually be decoded with.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensor/quant.h"
#include "tensor/quant_impl.h"

namespace cadenza::quant_detail {
namespace {

// Below this a group is treated as all zeros (avoids dividing by denormals).
constexpr float kGroupMaxEps = 1e-15f;

// Shared by Q4_K and Q5_K: fits the 8 sub-blocks (nmax = 15 or 31), quantizes their scales and
// mins to 6 bits, and writes d, dmin and the 12 packed bytes. L receives the final quants
// (0..nmax) of all 256 elements, re-derived from the stored (rounded) scales.
void quantize_scales_k4(const float* x, int nmax, float rmin, int nstep, uint16_t* d_out,
                        uint16_t* dmin_out, uint8_t scales_out[12], uint8_t L[kQK_K]) {
  constexpr int kSub = kQK_K / 32;
  float scales[kSub];
  float mins[kSub];
  float weights[32];
  uint8_t aux[32];
  float max_scale = 0.0f;
  float max_min = 0.0f;
  for (int j = 0; j < kSub; ++j) {
    const float* xs = x + 32 * j;
    // Weights favour large values relative to the sub-block's RMS; the constant part keeps
    // small values from being ignored.
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_scale_min(32, nmax, xs, weights, L + 32 * j, aux, &mins[j], rmin, 0.1f, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }

  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  std::memset(scales_out, 0, 12);
  for (int j = 0; j < kSub; ++j) {
    const int ls = round_clamp(inv_scale * scales[j], 0, 63);
    const int lm = round_clamp(inv_min * mins[j], 0, 63);
    if (j < 4) {
      scales_out[j] = static_cast<uint8_t>(ls);
      scales_out[j + 4] = static_cast<uint8_t>(lm);
    } else {
      scales_out[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales_out[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales_out[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = fp32_to_fp16(max_scale / 63.0f);
  *dmin_out = fp32_to_fp16(max_min / 63.0f);

  // Re-quantize against the scales the decoder will see. A sub-block whose scale rounded to 0
  // decodes to -dm whatever its quants, so its quants from the fit are kept.
  const float d_all = fp16_to_fp32(*d_out);
  const float dmin_all = fp16_to_fp32(*dmin_out);
  for (int j = 0; j < kSub; ++j) {
    int sc, mn;
    unpack_scale_min_k4(j, scales_out, &sc, &mn);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = dmin_all * static_cast<float>(mn);
    for (int l = 0; l < 32; ++l)
      L[32 * j + l] = static_cast<uint8_t>(round_clamp((x[32 * j + l] + dm) / d, 0, nmax));
  }
}

}  // namespace

// Asymmetric fit of n values onto q in [0, nmax] with x ~ scale*q - min_out, minimising the
// weighted squared error. Starts from the plain min/max mapping, then tries nstep+1 slightly
// different inverse scales (nmax + rmin + rdelta*k) / (max - min); for each, the quants it
// implies get a closed-form weighted least-squares (scale, offset). Keeps the best. The offset
// is never positive (a positive offset would waste levels on values below the data), so the
// returned *min_out = -offset >= 0.
// L receives the chosen quants; aux is scratch of n bytes.
float fit_scale_min_ref(int n, int nmax, const float* x, const float* w, uint8_t* L, uint8_t* aux,
                        float* min_out, float rmin, float rdelta, int nstep) {
  float min = x[0];
  float max = x[0];
  float sum_w = w[0];
  float sum_x = w[0] * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::memset(L, 0, static_cast<size_t>(n));
    *min_out = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(round_clamp(iscale * (x[i] - min), 0, nmax));
    const float diff = scale * L[i] + min - x[i];
    best_error += w[i] * (diff * diff);
  }
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = round_clamp(iscale * (x[i] - min), 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      const float lf = static_cast<float>(l);
      sum_l += w[i] * lf;
      sum_l2 += w[i] * lf * lf;
      sum_xl += w[i] * lf * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0.0f) {  // refit with the offset pinned at 0
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * aux[i] + this_min - x[i];
      error += w[i] * (diff * diff);
    }
    if (error < best_error) {
      std::memcpy(L, aux, static_cast<size_t>(n));
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *min_out = -min;
  return scale;
}

// Symmetric fit of n values onto l in [-nmax, nmax-1] with x ~ scale*l, weights x^2 (the
// reference's rmse_type 1). The largest-magnitude value anchors the trial scales (it maps to
// -nmax, as in Q4_0); 18 nearby inverse scales are tried and the least-squares scale of the best
// is returned. The result may be negative. L receives l + nmax (0 .. 2*nmax-1).
float fit_scale_symmetric_ref(int n, int nmax, const float* x, uint8_t* L) {
  float max = 0.0f;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  // Weighted sums for the quants implied by one inverse scale.
  auto sums = [&](float iscale, float* sumlx, float* suml2) {
    *sumlx = 0.0f;
    *suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(round_clamp(iscale * x[i], -nmax, nmax - 1));
      const float w = x[i] * x[i];
      *sumlx += w * x[i] * l;
      *suml2 += w * l * l;
    }
  };
  auto assign = [&](float iscale) {
    for (int i = 0; i < n; ++i)
      L[i] = static_cast<uint8_t>(nmax + round_clamp(iscale * x[i], -nmax, nmax - 1));
  };

  float iscale = -static_cast<float>(nmax) / max;
  float sumlx, suml2;
  sums(iscale, &sumlx, &suml2);
  assign(iscale);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  // scale*sumlx = sumlx^2/suml2 is the error reduction achieved by the fit; maximise it.
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    sums(iscale, &sumlx, &suml2);
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      assign(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void dequantize_q4_K(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ4_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    float* y = dst + i * kQK_K;
    for (int c = 0; c < 4; ++c) {  // 64-element chunks: sub-blocks 2c (low) and 2c+1 (high)
      int sc0, mn0, sc1, mn1;
      unpack_scale_min_k4(2 * c, b.scales, &sc0, &mn0);
      unpack_scale_min_k4(2 * c + 1, b.scales, &sc1, &mn1);
      const float d0 = d * static_cast<float>(sc0), m0 = dmin * static_cast<float>(mn0);
      const float d1 = d * static_cast<float>(sc1), m1 = dmin * static_cast<float>(mn1);
      const uint8_t* q = b.qs + 32 * c;
      for (int l = 0; l < 32; ++l) {
        y[64 * c + l] = d0 * static_cast<float>(q[l] & 0xF) - m0;
        y[64 * c + 32 + l] = d1 * static_cast<float>(q[l] >> 4) - m1;
      }
    }
  }
}

void dequantize_q5_K(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ5_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    float* y = dst + i * kQK_K;
    for (int c = 0; c < 4; ++c) {
      int sc0, mn0, sc1, mn1;
      unpack_scale_min_k4(2 * c, b.scales, &sc0, &mn0);
      unpack_scale_min_k4(2 * c + 1, b.scales, &sc1, &mn1);
      const float d0 = d * static_cast<float>(sc0), m0 = dmin * static_cast<float>(mn0);
      const float d1 = d * static_cast<float>(sc1), m1 = dmin * static_cast<float>(mn1);
      const uint8_t* q = b.qs + 32 * c;
      for (int l = 0; l < 32; ++l) {
        const int hi0 = ((b.qh[l] >> (2 * c)) & 1) << 4;
        const int hi1 = ((b.qh[l] >> (2 * c + 1)) & 1) << 4;
        y[64 * c + l] = d0 * static_cast<float>((q[l] & 0xF) + hi0) - m0;
        y[64 * c + 32 + l] = d1 * static_cast<float>((q[l] >> 4) + hi1) - m1;
      }
    }
  }
}

void dequantize_q6_K(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ6_K>(src, i);
    const float d = fp16_to_fp32(b.d);
    for (int h = 0; h < 2; ++h) {  // halves of 128 elements
      const uint8_t* ql = b.ql + 64 * h;
      const uint8_t* qh = b.qh + 32 * h;
      float* y = dst + i * kQK_K + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q[4] = {
            ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32,
            ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32,
            ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32,
            ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32,
        };
        for (int g = 0; g < 4; ++g) {
          const int e = 32 * g + l;  // element inside the half
          const float sc = static_cast<float>(b.scales[8 * h + e / 16]);
          y[e] = d * sc * static_cast<float>(q[g]);  // (d*sc)*q, the reference's order
        }
      }
    }
  }
}

void dequantize_q8_K(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto b = load_block<BlockQ8_K>(src, i);
    for (int j = 0; j < kQK_K; ++j) dst[i * kQK_K + j] = b.d * static_cast<float>(b.qs[j]);
  }
}

void quantize_q4_K(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK_K;
    BlockQ4_K b{};
    uint8_t L[kQK_K];
    quantize_scales_k4(x, 15, -1.0f, 20, &b.d, &b.dmin, b.scales, L);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        b.qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    store_block(dst, i, b);
  }
}

void quantize_q5_K(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK_K;
    BlockQ5_K b{};
    uint8_t L[kQK_K];
    quantize_scales_k4(x, 31, -0.5f, 15, &b.d, &b.dmin, b.scales, L);
    for (int e = 0; e < kQK_K; ++e)  // fifth bits: element e -> qh[e % 32] bit e / 32
      b.qh[e % 32] |= static_cast<uint8_t>((L[e] >> 4) << (e / 32));
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        b.qs[32 * c + l] =
            static_cast<uint8_t>((L[64 * c + l] & 0xF) | ((L[64 * c + 32 + l] & 0xF) << 4));
    store_block(dst, i, b);
  }
}

void quantize_q6_K(const float* src, uint8_t* dst, int64_t nb) {
  constexpr int kSub = kQK_K / 16;
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK_K;
    BlockQ6_K b{};
    uint8_t L[kQK_K];  // l + 32, 0..63
    float scales[kSub];
    float max_scale = 0.0f;  // signed scale of largest magnitude
    float max_abs_scale = 0.0f;
    for (int j = 0; j < kSub; ++j) {
      scales[j] = fit_scale_symmetric(16, 32, x + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {  // all (near) zero: an all-zero block decodes to 0
      store_block(dst, i, b);
      continue;
    }
    // Like Q4_0, the largest scale maps to -128 so that the int8 range is used fully.
    const float iscale = -128.0f / max_scale;
    b.d = fp32_to_fp16(1.0f / iscale);
    for (int j = 0; j < kSub; ++j)
      b.scales[j] = static_cast<int8_t>(round_clamp(iscale * scales[j], -128, 127));
    const float d_all = fp16_to_fp32(b.d);
    for (int j = 0; j < kSub; ++j) {
      const float d = d_all * static_cast<float>(b.scales[j]);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<uint8_t>(32 + round_clamp(x[16 * j + l] / d, -32, 31));
    }
    pack_q6_K(L, b);
    store_block(dst, i, b);
  }
}

void quantize_q8_K(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK_K;
    BlockQ8_K b{};
    float max = 0.0f;
    float amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      store_block(dst, i, b);
      continue;
    }
    // The largest-magnitude value maps to -127 exactly; d is kept in fp32 (no fp16 rounding).
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) b.qs[j] = static_cast<int8_t>(round_clamp(iscale * x[j], -128, 127));
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += b.qs[16 * g + l];
      b.bsums[g] = static_cast<int16_t>(sum);
    }
    b.d = 1.0f / iscale;
    store_block(dst, i, b);
  }
}

}  // namespace cadenza::quant_detail
