// AVX-512 attention inner loop (attention.h). Compiled with the avx512 flags; everything in an
// anonymous namespace or a plain function (see internal.h for why); exp is a vector polynomial.
// F16 / Q8_0 K/V rows are decoded per chunk of 32 positions into scratch (vcvtph2ps; int8 -> f32
// times the block's f16 scale), then the chunk runs the F32 instructions.
//
// Per (head, position): the dot product is a chain of fmas over dk/16 vectors, then the 16 lanes
// are summed by a fixed transposing tree shared by 16 positions (sum16); per chunk the running max, the chunk's weights (vector exp) and their sum
// (a fixed reduction) update the running sum; the value accumulator (dv floats per head, kept in
// registers for the chunk) is rescaled once per chunk and gets one fma per (position, 16 values).
#include "kernels/simd/intrinsics.h"

#include <cstdint>

#include "kernels/simd/attention.h"

namespace cadenza::simd::detail {
namespace {

#include "kernels/simd/exp_avx512.inc"

// Lane j of the result = the sum of the 16 lanes of v[j] (a fixed tree: pairs within 128-bit
// lanes, then across them).
inline __m512 sum16(const __m512 v[16]) {
  __m512 x[4];
  for (int quad = 0; quad < 4; ++quad) {
    const __m512* w = v + 4 * quad;
    const __m512 a = _mm512_add_ps(_mm512_unpacklo_ps(w[0], w[1]), _mm512_unpackhi_ps(w[0], w[1]));
    const __m512 b = _mm512_add_ps(_mm512_unpacklo_ps(w[2], w[3]), _mm512_unpackhi_ps(w[2], w[3]));
    // Per 128-bit lane: [w0, w1, w2, w3] partial sums over that lane.
    x[quad] = _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  const __m512 y0 = _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 y1 = _mm512_add_ps(_mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(y0, y1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(y0, y1, _MM_SHUFFLE(3, 1, 3, 1)));
}

}  // namespace

void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = exp_any(_mm512_sub_ps(_mm512_setzero_ps(), g));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = exp_any(_mm512_sub_ps(_mm512_setzero_ps(), g));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

namespace {

// Decodes `count` rows of n elements (a multiple of 16; 32 for Q8_0) of type T to f32 at
// dst + j * n. Exact: vcvtph2ps, and d * q with d from _cvtsh_ss (f16c), as dequantize_row does.
template <DType T>
void decode_rows(const void* const* rows, int count, int n, float* dst) {
  for (int j = 0; j < count; ++j) {
    float* o = dst + static_cast<int64_t>(j) * n;
    if constexpr (T == DType::F16) {
      const auto* h = static_cast<const uint8_t*>(rows[j]);
      for (int i = 0; i < n; i += 16)
        _mm512_storeu_ps(o + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + 2 * i))));
    } else {
      static_assert(T == DType::Q8_0);
      const auto* b = static_cast<const uint8_t*>(rows[j]);
      for (int i = 0; i < n; i += 32, b += 34) {
        uint16_t bits;
        __builtin_memcpy(&bits, b, 2);
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(bits));
        const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2))));
        const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 18))));
        _mm512_storeu_ps(o + i, _mm512_mul_ps(lo, d));
        _mm512_storeu_ps(o + i + 16, _mm512_mul_ps(hi, d));
      }
    }
  }
}

// KC = dk / 16 and NV = dv / 16 when known at compile time (the common head sizes), 0 otherwise:
// the same instructions either way, fully unrolled with the accumulators in registers when known.
// T: the K/V element type; F16/Q8_0 rows are decoded to f32 per chunk (once for all nq heads)
// and then go through exactly the F32 instructions.
template <int KC, int NV, DType T>
void attend_impl(const float* const* q, int nq, const void* const* k_rows,
                 const void* const* v_rows, int64_t n, int dk, int dv, float scale,
                 const float* sinks, float* const* out, float* scratch, float* part_max,
                 float* part_sum) {
  float* scores = scratch;                       // [nq][kAttendChunk]
  float* acc = scratch + nq * kAttendChunk;      // [nq][dv]
  float* k_dec = acc + nq * dv;                  // [kAttendChunk][dk] (F16/Q8_0)
  float* v_dec = k_dec + kAttendChunk * dk;      // [kAttendChunk][dv] (F16/Q8_0)
  float running_max[kAttendMaxHeads], running_sum[kAttendMaxHeads];
  for (int h = 0; h < nq; ++h) {
    running_max[h] = -__builtin_inff();
    running_sum[h] = 0.0f;
    for (int i = 0; i < dv; i += 16) _mm512_storeu_ps(acc + h * dv + i, _mm512_setzero_ps());
  }
  const int kc = KC > 0 ? KC : dk / 16;
  const float* kr[kAttendChunk];
  const float* vr[kAttendChunk];
  for (int64_t start = 0; start < n; start += kAttendChunk) {
    const int count = static_cast<int>(n - start < kAttendChunk ? n - start : kAttendChunk);
    if constexpr (T == DType::F32) {
      for (int j = 0; j < count; ++j) {
        kr[j] = static_cast<const float*>(k_rows[start + j]);
        vr[j] = static_cast<const float*>(v_rows[start + j]);
      }
    } else {
      decode_rows<T>(k_rows + start, count, dk, k_dec);
      decode_rows<T>(v_rows + start, count, dv, v_dec);
      for (int j = 0; j < count; ++j) {
        kr[j] = k_dec + j * dk;
        vr[j] = v_dec + j * dv;
      }
    }
    // Scores, 16 positions at a time per head: 16 fma chains, then one transposing reduction
    // (lane j = position j's sum); positions past `count` are zero and masked below.
    for (int h = 0; h < nq; ++h) {
      const float* qh = q[h];
      for (int g = 0; g < count; g += 16) {
        __m512 part[16];
        for (int jj = 0; jj < 16; ++jj) {
          if (g + jj >= count) {
            part[jj] = _mm512_setzero_ps();
            continue;
          }
          const float* kp = kr[g + jj];
          __m512 acc_s = _mm512_mul_ps(_mm512_loadu_ps(qh), _mm512_loadu_ps(kp));
          for (int c = 1; c < kc; ++c)
            acc_s = _mm512_fmadd_ps(_mm512_loadu_ps(qh + 16 * c), _mm512_loadu_ps(kp + 16 * c), acc_s);
          part[jj] = acc_s;
        }
        _mm512_storeu_ps(scores + h * kAttendChunk + g, _mm512_mul_ps(sum16(part), _mm512_set1_ps(scale)));
      }
    }
    // Online softmax update per head, then the weights of this chunk in place of the scores
    // (lanes past `count` are computed on -inf scores and ignored).
    const __mmask32 valid = count == 32 ? 0xffffffffu : ((1u << count) - 1u);
    for (int h = 0; h < nq; ++h) {
      float* sh = scores + h * kAttendChunk;
      const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
      const __m512 s0 = _mm512_mask_loadu_ps(ninf, static_cast<__mmask16>(valid), sh);
      const __m512 s1 = _mm512_mask_loadu_ps(ninf, static_cast<__mmask16>(valid >> 16), sh + 16);
      const float chunk_max = _mm512_reduce_max_ps(_mm512_max_ps(s0, s1));
      const float new_max = running_max[h] > chunk_max ? running_max[h] : chunk_max;
      const __m512 corr = exp_nonpositive(_mm512_set1_ps(running_max[h] - new_max));
      const __m512 mx = _mm512_set1_ps(new_max);
      const __m512 p0 = _mm512_maskz_mov_ps(static_cast<__mmask16>(valid), exp_nonpositive(_mm512_sub_ps(s0, mx)));
      const __m512 p1 = _mm512_maskz_mov_ps(static_cast<__mmask16>(valid >> 16), exp_nonpositive(_mm512_sub_ps(s1, mx)));
      _mm512_storeu_ps(sh, p0);
      _mm512_storeu_ps(sh + 16, p1);
      running_sum[h] = running_sum[h] * _mm512_cvtss_f32(corr) +
                       (_mm512_reduce_add_ps(p0) + _mm512_reduce_add_ps(p1));
      running_max[h] = new_max;
      // Values: the head's accumulator slice in registers, one fma per (position, 16 values).
      for (int i0 = 0; i0 < dv; i0 += 128) {
        const int nv = NV > 0 ? NV : (dv - i0 < 128 ? dv - i0 : 128) / 16;
        __m512 a[8];
        for (int c = 0; c < nv; ++c) a[c] = _mm512_mul_ps(_mm512_loadu_ps(acc + h * dv + i0 + 16 * c), corr);
        for (int j = 0; j < count; ++j) {
          const float* vp = vr[j] + i0;
          const __m512 pj = _mm512_set1_ps(sh[j]);
          for (int c = 0; c < nv; ++c) a[c] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vp + 16 * c), a[c]);
        }
        for (int c = 0; c < nv; ++c) _mm512_storeu_ps(acc + h * dv + i0 + 16 * c, a[c]);
      }
    }
  }
  for (int h = 0; h < nq; ++h) {
    if (part_max) {  // the partial form: the state as it stands, unnormalised (attend_partial)
      part_max[h] = running_max[h];
      part_sum[h] = running_sum[h];
      for (int i = 0; i < dv; i += 16) _mm512_storeu_ps(out[h] + i, _mm512_loadu_ps(acc + h * dv + i));
      continue;
    }
    const __m512 inv = _mm512_set1_ps(attend_final_scale(running_max[h], running_sum[h], sinks, h));
    for (int i = 0; i < dv; i += 16)
      _mm512_storeu_ps(out[h] + i, _mm512_mul_ps(_mm512_loadu_ps(acc + h * dv + i), inv));
  }
}

template <DType T>
void attend_typed(const float* const* q, int nq, const void* const* k_rows,
                  const void* const* v_rows, int64_t n, int dk, int dv, float scale,
                  const float* sinks, float* const* out, float* scratch, float* part_max,
                  float* part_sum) {
  if (dk == 64 && dv == 64)
    return attend_impl<4, 4, T>(q, nq, k_rows, v_rows, n, dk, dv, scale, sinks, out, scratch, part_max, part_sum);
  if (dk == 128 && dv == 128)
    return attend_impl<8, 8, T>(q, nq, k_rows, v_rows, n, dk, dv, scale, sinks, out, scratch, part_max, part_sum);
  attend_impl<0, 0, T>(q, nq, k_rows, v_rows, n, dk, dv, scale, sinks, out, scratch, part_max, part_sum);
}

}  // namespace

void attend_avx512(const float* const* q, int nq, const void* const* k_rows,
                   const void* const* v_rows, DType type, int64_t n, int dk, int dv, float scale,
                   const float* sinks, float* const* out, float* scratch, float* part_max,
                   float* part_sum) {
  switch (type) {
    case DType::F16:
      return attend_typed<DType::F16>(q, nq, k_rows, v_rows, n, dk, dv, scale, sinks, out, scratch, part_max, part_sum);
    case DType::Q8_0:
      return attend_typed<DType::Q8_0>(q, nq, k_rows, v_rows, n, dk, dv, scale, sinks, out, scratch, part_max, part_sum);
    default:
      return attend_typed<DType::F32>(q, nq, k_rows, v_rows, n, dk, dv, scale, sinks, out, scratch, part_max, part_sum);
  }
}

}  // namespace cadenza::simd::detail
