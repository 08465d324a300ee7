// AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c; see internal.h for the rules of a
// per-ISA file). Integer dot products use the maddubs (u8 x s8 -> s16 pairs) + madd (s16 -> s32)
// pair; for signed x signed blocks the sign trick moves the weight's sign onto the activation:
// |w| * (a * sign(w)) = w * a. Saturation: |pair| <= 2 * 128 * 127 < 32767 because activation
// quants are in -127..127.
#include "kernels/simd/intrinsics.h"

#include <cstdint>

#include "kernels/simd/internal.h"
#include "tensor/iq_grids.h"

namespace cadenza::simd::detail {
namespace {

#include "kernels/simd/gemm_driver.inc"

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

inline __m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline float f16(const uint8_t* p) { return _cvtsh_ss(ld16(p)); }

// ---- activation quantization (bit-identical to tensor/quant.h quantize_row) ----

inline float hmax(__m256 m) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256 vabs(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

inline float amax_n(const float* x, int n) {
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, vabs(_mm256_loadu_ps(x + i)));
  return hmax(m);
}

// Packs four vectors of 8 int32 (each in -128..127) into 32 int8 in order.
inline void store_i8x32(uint8_t* dst, const __m256i q[4]) {
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// std::round (half away from zero) of v clamped to [-127, 127], as int32.
inline __m256i round_away_127(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 half_up = _mm256_cmp_ps(vabs(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
  __m256 r = _mm256_add_ps(t, _mm256_and_ps(half_up, one));
  r = _mm256_max_ps(_mm256_min_ps(r, _mm256_set1_ps(127.0f)), _mm256_set1_ps(-127.0f));
  return _mm256_cvttps_epi32(r);
}

// Q8_0: d = amax / 127, q = round-half-away(x * (1/d)) in [-127, 127].
void quantize_q8_0(const float* x, int64_t k, void* dst) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + 32 * b;
    const float d = amax_n(xb, 32) / 127.0f;
    const __m256 vid = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    const uint16_t dh = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    __builtin_memcpy(out + 34 * b, &dh, 2);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = round_away_127(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * i), vid));
    store_i8x32(out + 34 * b + 2, q);
  }
}

// Q8_K: max = the first element of largest magnitude, iscale = -127 / max,
// q = round-half-even(iscale * x) in [-128, 127], d = 1 / iscale; all-zero block -> zeros.
void quantize_q8_k(const float* x, int64_t k, void* dst) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < k / 256; ++b) {
    const float* xb = x + 256 * b;
    uint8_t* ob = out + 292 * b;
    const float amax = amax_n(xb, 256);
    if (amax == 0.0f) {
      __builtin_memset(ob, 0, 292);
      continue;
    }
    float max = amax;
    for (int i = 0; i < 256; i += 8) {
      const int m = _mm256_movemask_ps(_mm256_cmp_ps(vabs(_mm256_loadu_ps(xb + i)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
      if (m != 0) {
        max = xb[i + __builtin_ctz(static_cast<unsigned>(m))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const float d = 1.0f / iscale;
    __builtin_memcpy(ob, &d, 4);
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int c = 0; c < 8; ++c) {
      __m256i q[4];
      for (int i = 0; i < 4; ++i) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xb + 32 * c + 8 * i), vs);
        v = _mm256_max_ps(_mm256_min_ps(v, _mm256_set1_ps(127.0f)), _mm256_set1_ps(-128.0f));
        q[i] = _mm256_cvtps_epi32(v);
      }
      store_i8x32(ob + 4 + 32 * c, q);
      const int16_t s0 = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
      const int16_t s1 = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
      __builtin_memcpy(ob + 260 + 4 * c, &s0, 2);
      __builtin_memcpy(ob + 262 + 4 * c, &s1, 2);
    }
  }
}

// Q8_0 activations arrive repacked (q8_0_prep): da = float scales, qs = contiguous quants.
struct Q8_0Act {
  static int64_t act_row_bytes(int64_t k) { return q8_0_row_bytes(k); }
  static int64_t prep_bytes(int64_t k) { return q8_0_prep_bytes(k); }
  static void prep(const uint8_t* raw, int64_t k, uint8_t* dst) { q8_0_prep(raw, k, dst); }
};

// ---- Q8_0 x Q8_0: per block, 8 int32 lanes scaled by dw * da into one float accumulator ----
struct Q8_0Kernel : Q8_0Act {
  static constexpr int kTile = 4;
  static int64_t weight_row_bytes(int64_t k) { return q8_0_row_bytes(k); }
  template <int N>
  static void row(const uint8_t* w, int64_t k, const uint8_t* const* a, float* res) {
    const int64_t nb = k / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* wb = w + 34 * b;
      const __m256i qw = load256(wb + 2);
      const __m256i uw = _mm256_sign_epi8(qw, qw);  // |w| as u8 (-128 -> 128)
      const __m256 dw = _mm256_set1_ps(f16(wb));
      for (int j = 0; j < N; ++j) {
        const float* da = reinterpret_cast<const float*>(a[j]);
        const __m256i sa = _mm256_sign_epi8(load256(a[j] + 4 * nb + 32 * b), qw);
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(uw, sa), ones);
        acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_broadcast_ss(da + b)), _mm256_cvtepi32_ps(p), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) res[j] = hsum(acc[j]);
  }
};

// ---- Q4_0 x Q8_0: nibbles minus 8 in -8..7, sign trick with |a| as the unsigned side ----
struct Q4_0Kernel : Q8_0Act {
  static constexpr int kTile = 4;
  static int64_t weight_row_bytes(int64_t k) { return q4_0_row_bytes(k); }
  template <int N>
  static void row(const uint8_t* w, int64_t k, const uint8_t* const* a, float* res) {
    const int64_t nb = k / 32;
    const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0f), eight = _mm256_set1_epi8(8);
    __m256 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* wb = w + 18 * b;
      const __m128i x = load128(wb + 2);
      const __m256i q = _mm256_sub_epi8(
          _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), m4), eight);
      const __m256 dw = _mm256_set1_ps(f16(wb));
      for (int j = 0; j < N; ++j) {
        const float* da = reinterpret_cast<const float*>(a[j]);
        const __m256i qa = load256(a[j] + 4 * nb + 32 * b);
        const __m256i p = _mm256_madd_epi16(
            _mm256_maddubs_epi16(_mm256_sign_epi8(qa, qa), _mm256_sign_epi8(q, qa)), ones);
        acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_broadcast_ss(da + b)), _mm256_cvtepi32_ps(p), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) res[j] = hsum(acc[j]);
  }
};

// ---- Q4_K x Q8_K: maddubs(q, a) per 32-element sub-block, madd with the sub-block scale; the
// mins term from the activation's bsums; per super-block one fma (scales) and one fnmadd (mins).
struct Q4_KKernel : NoPrep {
  static constexpr int kTile = 2;
  static int64_t weight_row_bytes(int64_t k) { return q4_k_row_bytes(k); }
  static int64_t act_row_bytes(int64_t k) { return q8_k_row_bytes(k); }
  template <int N>
  static void row(const uint8_t* w, int64_t k, const uint8_t* const* a, float* res) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / 256; ++b) {
      const uint8_t* wb = w + 144 * b;
      const float d = f16(wb), dmin = f16(wb + 2);
      alignas(16) uint8_t sc[8], mn[8];
      unpack_q4_k_scales(wb + 4, sc, mn);
      const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn)));
      const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
      __m256i isum[N];
      for (int j = 0; j < N; ++j) isum[j] = _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {
        const __m256i x = load256(wb + 16 + 32 * c);
        const __m256i lo = _mm256_and_si256(x, m4), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
        const __m256i s0 = _mm256_set1_epi16(sc[2 * c]), s1 = _mm256_set1_epi16(sc[2 * c + 1]);
        for (int j = 0; j < N; ++j) {
          const uint8_t* aq = a[j] + 292 * b + 4 + 64 * c;
          const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load256(aq)), s0);
          const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load256(aq + 32)), s1);
          isum[j] = _mm256_add_epi32(isum[j], _mm256_add_epi32(p0, p1));
        }
      }
      for (int j = 0; j < N; ++j) {
        const uint8_t* ab = a[j] + 292 * b;
        const float da = ldf(ab);
        const __m256i m32 = _mm256_madd_epi16(load256(ab + 260), mins);
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(da * d), _mm256_cvtepi32_ps(isum[j]), acc[j]);
        acc[j] = _mm256_fnmadd_ps(_mm256_set1_ps(da * dmin), _mm256_cvtepi32_ps(m32), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) res[j] = hsum(acc[j]);
  }
};

// ---- Q6_K x Q8_K: q in 0..63 as the unsigned side, per 16-element sub-block scale via madd; the
// -32 offset applied once per super-block as 32 * sum_j sc[j] * bsums[j].
struct Q6_KKernel : NoPrep {
  static constexpr int kTile = 2;
  static int64_t weight_row_bytes(int64_t k) { return q6_k_row_bytes(k); }
  static int64_t act_row_bytes(int64_t k) { return q8_k_row_bytes(k); }
  template <int N>
  static void row(const uint8_t* w, int64_t k, const uint8_t* const* a, float* res) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m03 = _mm256_set1_epi8(0x03), m0c = _mm256_set1_epi8(0x0c),
                  m30 = _mm256_set1_epi8(0x30), mc0 = _mm256_set1_epi8(static_cast<char>(0xc0));
    __m256 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / 256; ++b) {
      const uint8_t* wb = w + 210 * b;
      const auto* scales = reinterpret_cast<const int8_t*>(wb + 192);
      const float d = f16(wb + 208);
      __m256i isum[N];
      for (int j = 0; j < N; ++j) isum[j] = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256i ql0 = load256(wb + 64 * h), ql1 = load256(wb + 64 * h + 32);
        const __m256i qh = load256(wb + 128 + 32 * h);
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m03), 4));
        q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m0c), 2));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                               _mm256_srli_epi16(_mm256_and_si256(qh, mc0), 2));
        for (int g = 0; g < 4; ++g) {
          const int s = 8 * h + 2 * g;
          const __m256i sv = _mm256_set_m128i(_mm_set1_epi16(scales[s + 1]), _mm_set1_epi16(scales[s]));
          for (int j = 0; j < N; ++j) {
            const __m256i aq = load256(a[j] + 292 * b + 4 + 128 * h + 32 * g);
            isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(_mm256_maddubs_epi16(q[g], aq), sv));
          }
        }
      }
      const __m256i sc16 = _mm256_cvtepi8_epi16(load128(wb + 192));
      for (int j = 0; j < N; ++j) {
        const uint8_t* ab = a[j] + 292 * b;
        const __m256i corr = _mm256_madd_epi16(load256(ab + 260), sc16);
        isum[j] = _mm256_sub_epi32(isum[j], _mm256_slli_epi32(corr, 5));
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(ldf(ab) * d), _mm256_cvtepi32_ps(isum[j]), acc[j]);
      }
    }
    for (int j = 0; j < N; ++j) res[j] = hsum(acc[j]);
  }
};

// ---- F16 / BF16 x f32: convert 8 halves, fma into two accumulators (16 per step), tail scalar ----
struct F16Cvt {
  static __m256 cvt(const uint8_t* p) { return _mm256_cvtph_ps(load128(p)); }
  static float one(const uint8_t* p) { return _cvtsh_ss(ld16(p)); }
};
struct BF16Cvt {
  static __m256 cvt(const uint8_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p)), 16));
  }
  static float one(const uint8_t* p) {
    const uint32_t bits = static_cast<uint32_t>(ld16(p)) << 16;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
  }
};

template <class Cvt>
struct HalfKernel : NoPrep {
  static constexpr int kTile = 4;
  static int64_t weight_row_bytes(int64_t k) { return half_row_bytes(k); }
  static int64_t act_row_bytes(int64_t k) { return f32_row_bytes(k); }
  template <int N>
  static void row(const uint8_t* w, int64_t k, const uint8_t* const* a, float* res) {
    const float* x[N];
    __m256 acc0[N], acc1[N];
    for (int j = 0; j < N; ++j) {
      x[j] = reinterpret_cast<const float*>(a[j]);
      acc0[j] = acc1[j] = _mm256_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
      const __m256 w0 = Cvt::cvt(w + 2 * i), w1 = Cvt::cvt(w + 2 * i + 16);
      for (int j = 0; j < N; ++j) {
        acc0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[j] + i), acc0[j]);
        acc1[j] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[j] + i + 8), acc1[j]);
      }
    }
    if (i + 8 <= k) {
      const __m256 w0 = Cvt::cvt(w + 2 * i);
      for (int j = 0; j < N; ++j) acc0[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[j] + i), acc0[j]);
      i += 8;
    }
    for (int j = 0; j < N; ++j) {
      float s = hsum(_mm256_add_ps(acc0[j], acc1[j]));
      for (int64_t t = i; t < k; ++t) s += Cvt::one(w + 2 * t) * x[j][t];
      res[j] = s;
    }
  }
};

void gemm_q8_0(const void* w, int64_t rows, int64_t k, const void* a, int64_t n, float* out, int64_t ldo) {
  gemm_driver<Q8_0Kernel>(w, rows, k, a, n, out, ldo);
}
void gemm_q4_0(const void* w, int64_t rows, int64_t k, const void* a, int64_t n, float* out, int64_t ldo) {
  gemm_driver<Q4_0Kernel>(w, rows, k, a, n, out, ldo);
}
void gemm_q4_k(const void* w, int64_t rows, int64_t k, const void* a, int64_t n, float* out, int64_t ldo) {
  gemm_driver<Q4_KKernel>(w, rows, k, a, n, out, ldo);
}
void gemm_q6_k(const void* w, int64_t rows, int64_t k, const void* a, int64_t n, float* out, int64_t ldo) {
  gemm_driver<Q6_KKernel>(w, rows, k, a, n, out, ldo);
}
void gemm_f16(const void* w, int64_t rows, int64_t k, const float* x, int64_t n, float* out, int64_t ldo) {
  gemm_driver<HalfKernel<F16Cvt>>(w, rows, k, x, n, out, ldo);
}
void gemm_bf16(const void* w, int64_t rows, int64_t k, const float* x, int64_t n, float* out, int64_t ldo) {
  gemm_driver<HalfKernel<BF16Cvt>>(w, rows, k, x, n, out, ldo);
}

#include "kernels/simd/kernels_lowbit.inc"

}  // namespace

const KernelTable& avx2_table() {
  static const KernelTable t{"avx2",      quantize_q8_0, quantize_q8_k, gemm_q8_0,   gemm_q4_0,
                             gemm_q4_k,   gemm_q6_k,     gemm_f16,      gemm_bf16,   gemm_q2_k,
                             gemm_q3_k,   gemm_iq4_xs,   gemm_iq4_nl,   gemm_mxfp4,
                             gemm_iq2_xxs, gemm_iq2_xs, gemm_iq2_s, gemm_iq3_xxs, gemm_iq3_s,
                             gemm_iq1_s,   gemm_iq1_m};
  return t;
}

}  // namespace cadenza::simd::detail
