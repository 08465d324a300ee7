// Compute-peak loops at AVX2 (peak_loops.h): the int8 maddubs chain the avx2 kernels use
// (vpmaddubsw u8 x s8 -> s16 pairs, vpmaddwd by ones -> s32, vpaddd) and f32 FMA, in ymm.
// Compiled alone with the avx2 flags; like every per-ISA file it uses no C++ library templates.
#include "kernels/simd/intrinsics.h"

#include <cstdint>

#include "kernels/simd/peak_loops.h"

namespace cadenza::simd::detail {

// The kernels' int8 dot product at avx2: u8 x s8 -> s16 pairs (vpmaddubsw), s16 pairs by ones
// -> s32 (vpmaddwd), added to the accumulator (vpaddd): 32 multiply-adds per chain. In inline asm:
// with the intrinsics GCC 12 copies every accumulator through another register each iteration.
// The starting values differ so the compiler cannot merge equal statements.
#define CADENZA_PEAK_CHAIN(c)                                                 \
  __asm__("vpmaddubsw %[a], %[w], %[t]\n\tvpmaddwd %[ones], %[t], %[t]\n\t"  \
          "vpaddd %[t], %[acc], %[acc]"                                       \
          : [acc] "+x"(c), [t] "=&x"(tmp)                                     \
          : [w] "x"(w), [a] "x"(a), [ones] "x"(ones));

void peak_loop_int8_maddubs256(int64_t iterations, int64_t* sink) {
  const __m256i w = _mm256_set1_epi8(3), a = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  __m256i tmp;
  __m256i c0 = _mm256_set1_epi32(0), c1 = _mm256_set1_epi32(1), c2 = _mm256_set1_epi32(2),
          c3 = _mm256_set1_epi32(3), c4 = _mm256_set1_epi32(4), c5 = _mm256_set1_epi32(5),
          c6 = _mm256_set1_epi32(6), c7 = _mm256_set1_epi32(7);
  for (int64_t i = 0; i < iterations; ++i) {
    CADENZA_PEAK_CHAIN(c0) CADENZA_PEAK_CHAIN(c1) CADENZA_PEAK_CHAIN(c2) CADENZA_PEAK_CHAIN(c3)
    CADENZA_PEAK_CHAIN(c4) CADENZA_PEAK_CHAIN(c5) CADENZA_PEAK_CHAIN(c6) CADENZA_PEAK_CHAIN(c7)
  }
  const __m256i s = _mm256_add_epi32(
      _mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3)),
      _mm256_add_epi32(_mm256_add_epi32(c4, c5), _mm256_add_epi32(c6, c7)));
  *sink = _mm256_extract_epi32(s, 0);
}
#undef CADENZA_PEAK_CHAIN

void peak_loop_f32_fma256(int64_t iterations, int64_t* sink) {
  const __m256 a = _mm256_set1_ps(1e-7f), b = _mm256_set1_ps(0.5f);
  // Distinct starting values: equal accumulators would let the compiler keep only one.
  __m256 c0 = _mm256_set1_ps(0.0f), c1 = _mm256_set1_ps(1.0f), c2 = _mm256_set1_ps(2.0f),
         c3 = _mm256_set1_ps(3.0f), c4 = _mm256_set1_ps(4.0f), c5 = _mm256_set1_ps(5.0f),
         c6 = _mm256_set1_ps(6.0f), c7 = _mm256_set1_ps(7.0f), c8 = _mm256_set1_ps(8.0f),
         c9 = _mm256_set1_ps(9.0f), c10 = _mm256_set1_ps(10.0f), c11 = _mm256_set1_ps(11.0f);
  for (int64_t i = 0; i < iterations; ++i) {
    c0 = _mm256_fmadd_ps(a, b, c0);
    c1 = _mm256_fmadd_ps(a, b, c1);
    c2 = _mm256_fmadd_ps(a, b, c2);
    c3 = _mm256_fmadd_ps(a, b, c3);
    c4 = _mm256_fmadd_ps(a, b, c4);
    c5 = _mm256_fmadd_ps(a, b, c5);
    c6 = _mm256_fmadd_ps(a, b, c6);
    c7 = _mm256_fmadd_ps(a, b, c7);
    c8 = _mm256_fmadd_ps(a, b, c8);
    c9 = _mm256_fmadd_ps(a, b, c9);
    c10 = _mm256_fmadd_ps(a, b, c10);
    c11 = _mm256_fmadd_ps(a, b, c11);
  }
  const __m256 s = _mm256_add_ps(
      _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                    _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7))),
      _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
  *sink = _mm256_extract_epi32(_mm256_castps_si256(s), 0);  // the bits: a float may be out of int64 range
}

}  // namespace cadenza::simd::detail
