// Compute-peak loop for bf16 dot products (peak_loops.h): vdpbf16ps zmm (pairs of bf16 products
// summed into f32 lanes). Compiled alone with the avx512 flags plus -mavx512bf16, which Cascade
// Lake lacks: it runs only where cpuid lists AVX512_BF16. No C++ library templates (internal.h).
#include "kernels/simd/intrinsics.h"

#include <cstdint>

#include "kernels/simd/peak_loops.h"

namespace cadenza::simd::detail {
namespace {

#include "kernels/simd/peak_sink.inc"

}  // namespace

void peak_loop_bf16_dot512(int64_t iterations, int64_t* sink) {
  // bf16 1/128 and 0.5 (the upper halves of the f32 bit patterns), in every 16-bit element.
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3c00);
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3f00);
  // Distinct starting values: equal accumulators would let the compiler keep only one.
  __m512 c0 = _mm512_set1_ps(0.0f), c1 = _mm512_set1_ps(1.0f), c2 = _mm512_set1_ps(2.0f),
         c3 = _mm512_set1_ps(3.0f), c4 = _mm512_set1_ps(4.0f), c5 = _mm512_set1_ps(5.0f),
         c6 = _mm512_set1_ps(6.0f), c7 = _mm512_set1_ps(7.0f), c8 = _mm512_set1_ps(8.0f),
         c9 = _mm512_set1_ps(9.0f), c10 = _mm512_set1_ps(10.0f), c11 = _mm512_set1_ps(11.0f);
  for (int64_t i = 0; i < iterations; ++i) {
    c0 = _mm512_dpbf16_ps(c0, a, b);
    c1 = _mm512_dpbf16_ps(c1, a, b);
    c2 = _mm512_dpbf16_ps(c2, a, b);
    c3 = _mm512_dpbf16_ps(c3, a, b);
    c4 = _mm512_dpbf16_ps(c4, a, b);
    c5 = _mm512_dpbf16_ps(c5, a, b);
    c6 = _mm512_dpbf16_ps(c6, a, b);
    c7 = _mm512_dpbf16_ps(c7, a, b);
    c8 = _mm512_dpbf16_ps(c8, a, b);
    c9 = _mm512_dpbf16_ps(c9, a, b);
    c10 = _mm512_dpbf16_ps(c10, a, b);
    c11 = _mm512_dpbf16_ps(c11, a, b);
  }
  const __m512 t = _mm512_add_ps(
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                    _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7))),
      _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
  *sink = lane_sum(_mm512_castps_si512(t));
}

}  // namespace cadenza::simd::detail
