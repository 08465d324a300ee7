// Compute-peak loops at AVX-512 (peak_loops.h): int8 vpdpbusd (the avx512_vnni kernels' dot
// product), the maddubs chain of the avx512 kernels, and f32 FMA, all in zmm. Compiled alone with
// the avx512 flags plus -mavx512vnni (the VNNI loop runs only where cpuid lists AVX512_VNNI); like
// every per-ISA file it uses no C++ library templates.
#include "kernels/simd/intrinsics.h"

#include <cstdint>

#include "kernels/simd/peak_loops.h"

namespace cadenza::simd::detail {
namespace {

#include "kernels/simd/peak_sink.inc"

}  // namespace


// The integer loops are written in inline asm: with the intrinsics GCC 12 copies every
// accumulator through another register each iteration (two extra moves per instruction), which
// the front end then has to issue. Each asm is one instruction (or one chain) on a register
// accumulator; the starting values differ so the compiler cannot merge equal statements.
#define CADENZA_PEAK_DPBUSD(c) __asm__("vpdpbusd %[s], %[u], %[acc]" : [acc] "+v"(c) : [u] "v"(u), [s] "v"(s));

void peak_loop_int8_vnni512(int64_t iterations, int64_t* sink) {
  // 12 independent accumulators cover vpdpbusd's latency (5 cycles) at two per cycle.
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  __m512i c0 = _mm512_set1_epi32(0), c1 = _mm512_set1_epi32(1), c2 = _mm512_set1_epi32(2),
          c3 = _mm512_set1_epi32(3), c4 = _mm512_set1_epi32(4), c5 = _mm512_set1_epi32(5),
          c6 = _mm512_set1_epi32(6), c7 = _mm512_set1_epi32(7), c8 = _mm512_set1_epi32(8),
          c9 = _mm512_set1_epi32(9), c10 = _mm512_set1_epi32(10), c11 = _mm512_set1_epi32(11);
  for (int64_t i = 0; i < iterations; ++i) {
    CADENZA_PEAK_DPBUSD(c0) CADENZA_PEAK_DPBUSD(c1) CADENZA_PEAK_DPBUSD(c2)
    CADENZA_PEAK_DPBUSD(c3) CADENZA_PEAK_DPBUSD(c4) CADENZA_PEAK_DPBUSD(c5)
    CADENZA_PEAK_DPBUSD(c6) CADENZA_PEAK_DPBUSD(c7) CADENZA_PEAK_DPBUSD(c8)
    CADENZA_PEAK_DPBUSD(c9) CADENZA_PEAK_DPBUSD(c10) CADENZA_PEAK_DPBUSD(c11)
  }
  const __m512i t = _mm512_add_epi32(
      _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                       _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7))),
      _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)));
  *sink = lane_sum(t);
}
#undef CADENZA_PEAK_DPBUSD

// The kernels' int8 dot product at avx512: u8 x s8 -> s16 pairs (vpmaddubsw), s16 pairs by ones
// -> s32 (vpmaddwd), added to the accumulator (vpaddd): 64 multiply-adds per chain.
#define CADENZA_PEAK_CHAIN(c)                                                         \
  __asm__("vpmaddubsw %[a], %[w], %[t]\n\tvpmaddwd %[ones], %[t], %[t]\n\t"          \
          "vpaddd %[t], %[acc], %[acc]"                                               \
          : [acc] "+v"(c), [t] "=&v"(tmp)                                             \
          : [w] "v"(w), [a] "v"(a), [ones] "v"(ones));

void peak_loop_int8_maddubs512(int64_t iterations, int64_t* sink) {
  const __m512i w = _mm512_set1_epi8(3), a = _mm512_set1_epi8(-2), ones = _mm512_set1_epi16(1);
  __m512i tmp;
  __m512i c0 = _mm512_set1_epi32(0), c1 = _mm512_set1_epi32(1), c2 = _mm512_set1_epi32(2),
          c3 = _mm512_set1_epi32(3), c4 = _mm512_set1_epi32(4), c5 = _mm512_set1_epi32(5),
          c6 = _mm512_set1_epi32(6), c7 = _mm512_set1_epi32(7), c8 = _mm512_set1_epi32(8),
          c9 = _mm512_set1_epi32(9), c10 = _mm512_set1_epi32(10), c11 = _mm512_set1_epi32(11);
  for (int64_t i = 0; i < iterations; ++i) {
    CADENZA_PEAK_CHAIN(c0) CADENZA_PEAK_CHAIN(c1) CADENZA_PEAK_CHAIN(c2) CADENZA_PEAK_CHAIN(c3)
    CADENZA_PEAK_CHAIN(c4) CADENZA_PEAK_CHAIN(c5) CADENZA_PEAK_CHAIN(c6) CADENZA_PEAK_CHAIN(c7)
    CADENZA_PEAK_CHAIN(c8) CADENZA_PEAK_CHAIN(c9) CADENZA_PEAK_CHAIN(c10) CADENZA_PEAK_CHAIN(c11)
  }
  const __m512i t = _mm512_add_epi32(
      _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                       _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7))),
      _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)));
  *sink = lane_sum(t);
}
#undef CADENZA_PEAK_CHAIN

void peak_loop_f32_fma512(int64_t iterations, int64_t* sink) {
  const __m512 a = _mm512_set1_ps(1e-7f), b = _mm512_set1_ps(0.5f);
  // Distinct starting values: equal accumulators would let the compiler keep only one.
  __m512 c0 = _mm512_set1_ps(0.0f), c1 = _mm512_set1_ps(1.0f), c2 = _mm512_set1_ps(2.0f),
         c3 = _mm512_set1_ps(3.0f), c4 = _mm512_set1_ps(4.0f), c5 = _mm512_set1_ps(5.0f),
         c6 = _mm512_set1_ps(6.0f), c7 = _mm512_set1_ps(7.0f), c8 = _mm512_set1_ps(8.0f),
         c9 = _mm512_set1_ps(9.0f), c10 = _mm512_set1_ps(10.0f), c11 = _mm512_set1_ps(11.0f);
  for (int64_t i = 0; i < iterations; ++i) {
    c0 = _mm512_fmadd_ps(a, b, c0);
    c1 = _mm512_fmadd_ps(a, b, c1);
    c2 = _mm512_fmadd_ps(a, b, c2);
    c3 = _mm512_fmadd_ps(a, b, c3);
    c4 = _mm512_fmadd_ps(a, b, c4);
    c5 = _mm512_fmadd_ps(a, b, c5);
    c6 = _mm512_fmadd_ps(a, b, c6);
    c7 = _mm512_fmadd_ps(a, b, c7);
    c8 = _mm512_fmadd_ps(a, b, c8);
    c9 = _mm512_fmadd_ps(a, b, c9);
    c10 = _mm512_fmadd_ps(a, b, c10);
    c11 = _mm512_fmadd_ps(a, b, c11);
  }
  const __m512 t = _mm512_add_ps(
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                    _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7))),
      _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
  *sink = lane_sum(_mm512_castps_si512(t));
}

}  // namespace cadenza::simd::detail
