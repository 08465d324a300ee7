// AVX-512 paths of sampling.h. Compiled with the avx512 flags; everything in an anonymous
// namespace or a plain function (internal.h explains why).
#include "kernels/simd/intrinsics.h"

#include <cstdint>

#include "kernels/simd/sampling.h"

namespace cadenza::simd::detail {
namespace {

#include "kernels/simd/exp_avx512.inc"

// Lanes past n (the last partial vector) read as -inf: never larger than anything.
inline __m512 load_tail(const float* x, int64_t count) {
  const __mmask16 m = static_cast<__mmask16>((1u << count) - 1u);
  return _mm512_mask_loadu_ps(_mm512_set1_ps(-__builtin_inff()), m, x);
}

}  // namespace

int64_t argmax_avx512(const float* x, int64_t n) {
  // Two running (value, index) pairs per lane, each holding the first index of its largest value
  // (strictly greater replaces). The lowest index among the lanes that hold the overall maximum is
  // then the first occurrence of the maximum.
  __m512 best0 = _mm512_set1_ps(-__builtin_inff()), best1 = best0;
  __m512i at0 = _mm512_setzero_si512(), at1 = at0;
  __m512i idx0 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i idx1 = _mm512_add_epi32(idx0, _mm512_set1_epi32(16));
  const __m512i step = _mm512_set1_epi32(32);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    const __mmask16 m0 = _mm512_cmp_ps_mask(v0, best0, _CMP_GT_OQ);
    const __mmask16 m1 = _mm512_cmp_ps_mask(v1, best1, _CMP_GT_OQ);
    best0 = _mm512_mask_mov_ps(best0, m0, v0);
    best1 = _mm512_mask_mov_ps(best1, m1, v1);
    at0 = _mm512_mask_mov_epi32(at0, m0, idx0);
    at1 = _mm512_mask_mov_epi32(at1, m1, idx1);
    idx0 = _mm512_add_epi32(idx0, step);
    idx1 = _mm512_add_epi32(idx1, step);
  }
  for (; i < n; i += 16) {
    const __m512 v = n - i >= 16 ? _mm512_loadu_ps(x + i) : load_tail(x + i, n - i);
    const __mmask16 m = _mm512_cmp_ps_mask(v, best0, _CMP_GT_OQ);
    best0 = _mm512_mask_mov_ps(best0, m, v);
    at0 = _mm512_mask_mov_epi32(at0, m, idx0);
    idx0 = _mm512_add_epi32(idx0, _mm512_set1_epi32(16));
  }
  // All -inf: every lane kept index 0 or its first index, and -inf == -inf picks the lowest.
  const float top = _mm512_reduce_max_ps(_mm512_max_ps(best0, best1));
  const __m512 t = _mm512_set1_ps(top);
  const __m512i none = _mm512_set1_epi32(0x7fffffff);
  const __m512i c0 = _mm512_mask_mov_epi32(none, _mm512_cmp_ps_mask(best0, t, _CMP_EQ_OQ), at0);
  const __m512i c1 = _mm512_mask_mov_epi32(none, _mm512_cmp_ps_mask(best1, t, _CMP_EQ_OQ), at1);
  return _mm512_reduce_min_epi32(_mm512_min_epi32(c0, c1));
}

float max_value_avx512(const float* x, int64_t n) {
  __m512 m0 = _mm512_set1_ps(-__builtin_inff()), m1 = m0, m2 = m0, m3 = m0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
    m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + i + 32));
    m3 = _mm512_max_ps(m3, _mm512_loadu_ps(x + i + 48));
  }
  for (; i < n; i += 16)
    m0 = _mm512_max_ps(m0, n - i >= 16 ? _mm512_loadu_ps(x + i) : load_tail(x + i, n - i));
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
}

double softmax_weights_avx512(const float* x, int64_t n, float max, float inv_t, float* w) {
  const __m512 vmax = _mm512_set1_ps(max), vinv = _mm512_set1_ps(inv_t);
  const __m512 masked = _mm512_set1_ps(-__builtin_inff());
  __m512d s0 = _mm512_setzero_pd(), s1 = s0;
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t count = n - i >= 16 ? 16 : n - i;
    const __mmask16 live = static_cast<__mmask16>(count == 16 ? 0xffffu : (1u << count) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(live, x + i);
    // Masked logits (and the lanes past n) weigh exactly 0.
    const __mmask16 keep = _mm512_mask_cmp_ps_mask(live, v, masked, _CMP_NEQ_OQ);
    const __m512 e = _mm512_maskz_mov_ps(keep, exp_nonpositive(_mm512_mul_ps(_mm512_sub_ps(v, vmax), vinv)));
    _mm512_mask_storeu_ps(w + i, live, e);
    s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

}  // namespace cadenza::simd::detail
