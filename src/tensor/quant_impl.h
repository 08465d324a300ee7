// Internal to src/tensor: per-type block (de)quantizers behind quant.h's dispatch, and the
// helpers they share. Not for use outside this folder; callers go through quant.h.
//
// Every function takes a count of whole blocks (nb >= 0) and raw byte pointers: src/dst hold
// nb * sizeof(Block) bytes with no alignment requirement (blocks are memcpy'd, see blocks.h).
// Float inputs must be finite; the quantizers never invoke undefined behaviour on other inputs
// but their output is then unspecified.
#pragma once

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tensor/blocks.h"
#include "tensor/dtype.h"

namespace cadenza::quant_detail {

template <typename Block>
Block load_block(const uint8_t* src, int64_t i) {
  Block b;
  std::memcpy(&b, src + i * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
  return b;
}

template <typename Block>
void store_block(uint8_t* dst, int64_t i, const Block& b) {
  std::memcpy(dst + i * static_cast<int64_t>(sizeof(Block)), &b, sizeof(Block));
}

// round-half-to-even(v) clamped to [lo, hi], defined for every float: the clamp happens before
// the float -> int conversion (so huge values and infinities cannot overflow it) and NaN maps to
// the value nearest 0. Same result as the reference's nearest_int() followed by MIN/MAX.
inline int round_clamp(float v, int lo, int hi) {
  if (std::isnan(v)) return lo > 0 ? lo : (hi < 0 ? hi : 0);
  if (v <= static_cast<float>(lo)) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  // |v| < 2^22 here: adding 1.5 * 2^23 leaves round-half-even(v) in the low mantissa bits (the
  // default rounding mode), as nearbyint gives, without its out-of-line libm call (it was ~5% of
  // a K-quant search).
  assert(lo > -(1 << 22) && hi < (1 << 22));
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// Q6_K's quants L[0..255] (each 0..63) into ql (low 4 bits) and qh (high 2 bits), the layout
// its decoder reads: per 128-element half, elements l, l+32, l+64, l+96 share a qh byte.
inline void pack_q6_K(const uint8_t* L, BlockQ6_K& b) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      b.ql[64 * h + l] = static_cast<uint8_t>((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
      b.ql[64 * h + l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
      b.qh[32 * h + l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                              ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
    }
  }
}

// Truncation of a value known to be >= 0 (the legacy quantizers' "(int8_t)(x + 0.5f)"), clamped
// to [0, hi] before converting.
inline int trunc_clamp(float v, int hi) {
  if (!(v > 0.0f)) return 0;  // also NaN
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

// Scale searches shared by the K-quants (quant_kquants.cpp).
// fit_scale_min: asymmetric weighted least-squares fit of x[0..n) onto q in [0, nmax] with
// x ~ scale*q - *min_out (*min_out >= 0), trying nstep+1 inverse scales (nmax + rmin + rdelta*k)
// / (max - min); returns the scale, the quants in L; aux is n bytes of scratch. w: weights > 0.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, uint8_t* aux,
                    float* min_out, float rmin, float rdelta, int nstep);
// fit_scale_symmetric: x ~ scale*l, l in [-nmax, nmax-1] (the largest |x| anchors -nmax), 19
// trial scales, weights x^2; returns the (possibly negative) scale, L = l + nmax.
float fit_scale_symmetric(int n, int nmax, const float* x, uint8_t* L);
// Both dispatch (quant_search.cpp) to the vectorized searches below where the CPU has AVX2 and
// FMA (CADENZA_ISA=scalar forces the reference, as for the kernels); every path returns the
// scalar reference's result bit for bit. The vectorized ones need n <= 32, nstep < 32.
float fit_scale_min_ref(int n, int nmax, const float* x, const float* w, uint8_t* L, uint8_t* aux,
                        float* min_out, float rmin, float rdelta, int nstep);
float fit_scale_symmetric_ref(int n, int nmax, const float* x, uint8_t* L);
namespace avx2 {
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, uint8_t* aux,
                    float* min_out, float rmin, float rdelta, int nstep);
float fit_scale_symmetric(int n, int nmax, const float* x, uint8_t* L);
}  // namespace avx2
// The search levels: 0 scalar, 1 AVX2. search_level_supported(l): this CPU runs level l;
// search_level(): the one fit_scale_* use. set_search_level (tests) picks one (capped at what
// is supported) and returns the level in effect.
bool search_level_supported(int level);
int search_level();
int set_search_level(int level);

// 32-element families (quant_legacy.cpp).
void dequantize_q4_0(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q4_1(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q5_0(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q5_1(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q8_0(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q8_1(const uint8_t* src, float* dst, int64_t nb);
void quantize_q4_0(const float* src, uint8_t* dst, int64_t nb);
void quantize_q4_1(const float* src, uint8_t* dst, int64_t nb);
void quantize_q5_0(const float* src, uint8_t* dst, int64_t nb);
void quantize_q5_1(const float* src, uint8_t* dst, int64_t nb);
void quantize_q8_0(const float* src, uint8_t* dst, int64_t nb);
void quantize_q8_1(const float* src, uint8_t* dst, int64_t nb);

// K-quants, 256-element super-blocks (quant_kquants.cpp).
void dequantize_q4_K(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q5_K(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q6_K(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q8_K(const uint8_t* src, float* dst, int64_t nb);
void quantize_q4_K(const float* src, uint8_t* dst, int64_t nb);
void quantize_q5_K(const float* src, uint8_t* dst, int64_t nb);
void quantize_q6_K(const float* src, uint8_t* dst, int64_t nb);
void quantize_q8_K(const float* src, uint8_t* dst, int64_t nb);

// Low-bit K-quants (quant_kquants_low.cpp).
void dequantize_q2_K(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q3_K(const uint8_t* src, float* dst, int64_t nb);
void quantize_q2_K(const float* src, uint8_t* dst, int64_t nb);
void quantize_q3_K(const float* src, uint8_t* dst, int64_t nb);

// Non-linear 4-bit types (quant_nl.cpp): IQ4_NL, IQ4_XS, MXFP4.
void dequantize_iq4_nl(const uint8_t* src, float* dst, int64_t nb);
void dequantize_iq4_xs(const uint8_t* src, float* dst, int64_t nb);
void dequantize_mxfp4(const uint8_t* src, float* dst, int64_t nb);
void quantize_iq4_nl(const float* src, uint8_t* dst, int64_t nb);
void quantize_iq4_xs(const float* src, uint8_t* dst, int64_t nb);
void quantize_mxfp4(const float* src, uint8_t* dst, int64_t nb);

// Grid types (quant_iq.cpp decodes, quant_iq_encode.cpp encodes).
void dequantize_iq2_xxs(const uint8_t* src, float* dst, int64_t nb);
void dequantize_iq2_xs(const uint8_t* src, float* dst, int64_t nb);
void dequantize_iq2_s(const uint8_t* src, float* dst, int64_t nb);
void dequantize_iq3_xxs(const uint8_t* src, float* dst, int64_t nb);
void dequantize_iq3_s(const uint8_t* src, float* dst, int64_t nb);
void dequantize_iq1_s(const uint8_t* src, float* dst, int64_t nb);
void dequantize_iq1_m(const uint8_t* src, float* dst, int64_t nb);
void quantize_iq2_xxs(const float* src, uint8_t* dst, int64_t nb);
void quantize_iq2_xs(const float* src, uint8_t* dst, int64_t nb);
void quantize_iq2_s(const float* src, uint8_t* dst, int64_t nb);
void quantize_iq3_xxs(const float* src, uint8_t* dst, int64_t nb);
void quantize_iq3_s(const float* src, uint8_t* dst, int64_t nb);
void quantize_iq1_s(const float* src, uint8_t* dst, int64_t nb);
void quantize_iq1_m(const float* src, uint8_t* dst, int64_t nb);

// Importance-weighted encoders (quant_weighted.cpp): nb blocks of type t from src, weighting
// element i's squared error by importance[i] (nb blocks' worth of values). False (nothing
// written) for a type without one.
bool quantize_weighted_blocks(DType t, const float* src, const float* importance, uint8_t* dst,
                              int64_t nb);

}  // namespace cadenza::quant_detail
