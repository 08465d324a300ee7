// AVX-512 attention inner loop (attention.h). Compiled with the avx512 flags; everything in an
// anonymous namespace or a plain function (see internal.h for why); exp is a vector polynomial.
// F16 / Q8_0 K/V rows are decoded per chunk of 32 positions into scratch (vcvtph2ps; int8 -> f32
// times the block's f16 scale), then the chunk runs the F32 instructions.
//
// Per (head, position): the dot product is a chain of fmas over dk/16 vectors, then the 16 lanes
// are summed by a fixed transposing tree shared by 16 positions (sum16); per chunk the running max, the chunk's weights (vector exp) and their sum
// (a fixed reduction) update the running sum; the value accumulator (dv floats per head, kept in
// registers for the chunk) is rescaled once per chunk and gets one fma per (position, 16 values).
//
// The tile kernel (attend_tile, prefill) runs the same operations per row for many rows at once:
// K transposed per chunk so that a vector holds 16 positions (the lane chains and sum16's tree
// become whole-vector fmas and adds), the softmax step of 16 rows at once (reduce_rows), the
// value update of up to 4 rows per V load. Bit for bit attend's result per row (attention.h).
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

// The sum of x's 16 lanes by a fixed tree: the 256-bit halves, then the 128-bit halves, then lanes
// 0 + 2 and 1 + 3, then those two (the tree of GCC's _mm512_reduce_add_ps, written out so that it
// does not depend on the compiler's header and so that reduce_rows can run it on 16 rows at once).
inline float hsum16(__m512 x) {
  const __m256 a = _mm256_add_ps(_mm512_extractf32x8_ps(x, 1), _mm512_castps512_ps256(x));
  const __m128 b = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
  const __m128 c = _mm_add_ps(b, _mm_shuffle_ps(b, b, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, _MM_SHUFFLE(1, 1, 1, 1))));
}

template <bool Max>
inline __m512 reduce_op(__m512 a, __m512 b) {
  if constexpr (Max) return _mm512_max_ps(a, b);
  else return _mm512_add_ps(a, b);
}

// Lane j = the reduction of v[j]'s 16 lanes, for 16 rows at once: hsum16's tree (Max = false,
// bit for bit hsum16(v[j])) or the maximum (Max = true; exact in any order), level by level as a
// butterfly that packs two rows' partial results into one vector per level. The butterfly leaves
// row 4(s % 4) + s / 4 in lane s, so the rows are read in that order.
template <bool Max>
inline __m512 reduce_rows(const __m512 v[16]) {
  const auto row = [&](int s) { return v[4 * (s % 4) + s / 4]; };
  __m512 c[8], e[4], g[2];
  for (int k = 0; k < 8; ++k) {  // lanes i + 8 and i (256-bit halves): two rows per vector
    const __m512 a = row(2 * k), b = row(2 * k + 1);
    c[k] = reduce_op<Max>(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)), _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)));
  }
  for (int m = 0; m < 4; ++m)  // + 4 (128-bit halves): four rows per vector
    e[m] = reduce_op<Max>(_mm512_shuffle_f32x4(c[2 * m], c[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)),
                          _mm512_shuffle_f32x4(c[2 * m], c[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)));
  for (int n = 0; n < 2; ++n)  // lanes 0 + 2, 1 + 3 within 128 bits
    g[n] = reduce_op<Max>(_mm512_shuffle_ps(e[2 * n], e[2 * n + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_ps(e[2 * n], e[2 * n + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  return reduce_op<Max>(_mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// The online-softmax update of one row for one chunk (attend_impl; the tile kernel's softmax_rows
// does the same per lane for 16 rows at once): sh holds the chunk's scaled scores (lanes >= count ignored) and receives
// its weights (0 past count); returns the accumulator's correction factor (in every lane).
inline __m512 softmax_chunk(float* sh, int count, float& running_max, float& running_sum) {
  const __mmask32 valid = count == 32 ? 0xffffffffu : ((1u << count) - 1u);
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  const __m512 s0 = _mm512_mask_loadu_ps(ninf, static_cast<__mmask16>(valid), sh);
  const __m512 s1 = _mm512_mask_loadu_ps(ninf, static_cast<__mmask16>(valid >> 16), sh + 16);
  const float chunk_max = _mm512_reduce_max_ps(_mm512_max_ps(s0, s1));
  const float new_max = running_max > chunk_max ? running_max : chunk_max;
  const __m512 corr = exp_nonpositive(_mm512_set1_ps(running_max - new_max));
  const __m512 mx = _mm512_set1_ps(new_max);
  const __m512 p0 = _mm512_maskz_mov_ps(static_cast<__mmask16>(valid), exp_nonpositive(_mm512_sub_ps(s0, mx)));
  const __m512 p1 = _mm512_maskz_mov_ps(static_cast<__mmask16>(valid >> 16), exp_nonpositive(_mm512_sub_ps(s1, mx)));
  _mm512_storeu_ps(sh, p0);
  _mm512_storeu_ps(sh + 16, p1);
  running_sum = running_sum * _mm512_cvtss_f32(corr) + (hsum16(p0) + hsum16(p1));
  running_max = new_max;
  return corr;
}

// softmax_chunk for m <= 16 rows at once: rows i < m, scores s[i] (32 floats, count[i] valid),
// state running_max[idx[i]] / running_sum[idx[i]]; corr[i] receives the correction. Per row the
// same operations on the same values as softmax_chunk: the maximum is exact in any order, the
// correction's exp works lane by lane, and the sums of the weights follow hsum16's tree
// (reduce_rows).
inline void softmax_rows(int m, float* const* s, const int* count, const int* idx, float* running_max,
                         float* running_sum, float* corr) {
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  __m512 v0[16], v1[16];
  float rm[16], rs[16], nm[16];
  for (int i = 0; i < 16; ++i) {
    if (i >= m) {  // padding lanes: a harmless state, results unused
      v0[i] = ninf;
      rm[i] = 0.0f;
      rs[i] = 0.0f;
      continue;
    }
    const __mmask32 valid = count[i] == 32 ? 0xffffffffu : ((1u << count[i]) - 1u);
    v0[i] = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, static_cast<__mmask16>(valid), s[i]),
                          _mm512_mask_loadu_ps(ninf, static_cast<__mmask16>(valid >> 16), s[i] + 16));
    rm[i] = running_max[idx[i]];
    rs[i] = running_sum[idx[i]];
  }
  const __m512 old_max = _mm512_loadu_ps(rm);
  const __m512 new_max = _mm512_max_ps(old_max, reduce_rows<true>(v0));
  const __m512 c = exp_nonpositive(_mm512_sub_ps(old_max, new_max));
  _mm512_storeu_ps(nm, new_max);
  _mm512_storeu_ps(corr, c);  // corr has room for 16
  for (int i = 0; i < 16; ++i) {
    if (i >= m) {
      v0[i] = v1[i] = _mm512_setzero_ps();
      continue;
    }
    const __mmask32 valid = count[i] == 32 ? 0xffffffffu : ((1u << count[i]) - 1u);
    const __m512 mx = _mm512_set1_ps(nm[i]);
    v0[i] = _mm512_maskz_mov_ps(static_cast<__mmask16>(valid),
                                exp_nonpositive(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, static_cast<__mmask16>(valid), s[i]), mx)));
    v1[i] = _mm512_maskz_mov_ps(static_cast<__mmask16>(valid >> 16),
                                exp_nonpositive(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, static_cast<__mmask16>(valid >> 16), s[i] + 16), mx)));
    _mm512_storeu_ps(s[i], v0[i]);
    _mm512_storeu_ps(s[i] + 16, v1[i]);
  }
  const __m512 sum = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(rs), c),
                                   _mm512_add_ps(reduce_rows<false>(v0), reduce_rows<false>(v1)));
  _mm512_storeu_ps(rs, sum);
  for (int i = 0; i < m; ++i) {
    running_max[idx[i]] = nm[i];
    running_sum[idx[i]] = rs[i];
  }
}

// A row's end: the partial form's state as it stands, unnormalised (part_max non-null), or the
// accumulator times attend_final_scale.
inline void finish_row(const float* acc, int dv, float running_max, float running_sum,
                       const float* sinks, int h, float* out, float* part_max, float* part_sum) {
  if (part_max) {
    *part_max = running_max;
    *part_sum = running_sum;
    for (int i = 0; i < dv; i += 16) _mm512_storeu_ps(out + i, _mm512_loadu_ps(acc + i));
    return;
  }
  const __m512 inv = _mm512_set1_ps(attend_final_scale(running_max, running_sum, sinks, h));
  for (int i = 0; i < dv; i += 16) _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_loadu_ps(acc + i), inv));
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
    for (int h = 0; h < nq; ++h) {
      float* sh = scores + h * kAttendChunk;
      const __m512 corr = softmax_chunk(sh, count, running_max[h], running_sum[h]);
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
  for (int h = 0; h < nq; ++h)
    finish_row(acc + h * dv, dv, running_max[h], running_sum[h], sinks, h, out[h],
               part_max ? part_max + h : nullptr, part_max ? part_sum + h : nullptr);
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

// ---- The tile kernel (attend_tile): many query rows over one chunk of K/V at a time.

// out[l] = column l of the 16 x 16 block in[0..15] (in[j] = row j).
inline void transpose16(const __m512 in[16], __m512 out[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(in[2 * i], in[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(in[2 * i], in[2 * i + 1]);
  }
  // u[4i + e], 128-bit lane L: rows 4i .. 4i+3 of element 4L + e.
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int e = 0; e < 4; ++e) {
    const __m512 x0 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x88), y0 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xdd);
    const __m512 x1 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x88), y1 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xdd);
    out[e] = _mm512_shuffle_f32x4(x0, x1, 0x88);
    out[8 + e] = _mm512_shuffle_f32x4(x0, x1, 0xdd);
    out[4 + e] = _mm512_shuffle_f32x4(y0, y1, 0x88);
    out[12 + e] = _mm512_shuffle_f32x4(y0, y1, 0xdd);
  }
}

// kT[d * 32 + j] = kr[j][d] for the chunk's positions j < count, 0 for count <= j < 32.
inline void transpose_keys(const float* const* kr, int count, int dk, float* kT) {
  for (int g = 0; g < kAttendChunk; g += 16) {
    for (int c = 0; c < dk; c += 16) {
      __m512 in[16], out[16];
      for (int j = 0; j < 16; ++j) in[j] = g + j < count ? _mm512_loadu_ps(kr[g + j] + c) : _mm512_setzero_ps();
      transpose16(in, out);
      for (int l = 0; l < 16; ++l) _mm512_storeu_ps(kT + (c + l) * kAttendChunk + g, out[l]);
    }
  }
}

// Scaled scores of R rows against a chunk's 32 positions from kT ([dk][32]), into s[r][0..31].
// attend_impl computes the score of (row, position p) as 16 lane chains (lane l: q[l] k_p[l], then
// fma with q[16c + l] k_p[16c + l] for c = 1 .. kc-1) summed by sum16's tree
// ((l0 + l2) + (l1 + l3)) per 4 lanes, then (s0 + s1) + (s2 + s3) over the 4 groups, times scale.
// Here lane j of a vector is position j: each lane chain is a chain of broadcast-q times kT
// vectors, and the tree adds whole vectors. Same operations on the same operands (a + b = b + a
// and q k = k q in IEEE arithmetic), so the same floats.
template <int KC, int R>
inline void tile_scores(const float* const* q, const float* kT, int kc_rt, __m512 scale, float* const* s) {
  const int kc = KC > 0 ? KC : kc_rt;
  __m512 t01[R][2], t23[R][2];
  for (int quad = 0; quad < 4; ++quad) {
    __m512 half[2][R][2];
    for (int pair = 0; pair < 2; ++pair) {
      const int la = 4 * quad + pair, lb = la + 2;
      __m512 a[R][2], b[R][2];
      for (int c = 0; c < kc; ++c) {
        const float* ka = kT + (16 * c + la) * kAttendChunk;
        const float* kb = kT + (16 * c + lb) * kAttendChunk;
        __m512 ka0 = _mm512_loadu_ps(ka), ka1 = _mm512_loadu_ps(ka + 16);
        __m512 kb0 = _mm512_loadu_ps(kb), kb1 = _mm512_loadu_ps(kb + 16);
        if constexpr (R > 1) {  // in registers for the R rows (GCC folded a reload into each fma:
                                // one more load per fma, ~10% slower for head dim 64)
          __asm__("" : "+v"(ka0), "+v"(ka1), "+v"(kb0), "+v"(kb1));
        }
        for (int r = 0; r < R; ++r) {
          const __m512 qa = _mm512_set1_ps(q[r][16 * c + la]), qb = _mm512_set1_ps(q[r][16 * c + lb]);
          if (c == 0) {
            a[r][0] = _mm512_mul_ps(qa, ka0);
            a[r][1] = _mm512_mul_ps(qa, ka1);
            b[r][0] = _mm512_mul_ps(qb, kb0);
            b[r][1] = _mm512_mul_ps(qb, kb1);
          } else {
            a[r][0] = _mm512_fmadd_ps(qa, ka0, a[r][0]);
            a[r][1] = _mm512_fmadd_ps(qa, ka1, a[r][1]);
            b[r][0] = _mm512_fmadd_ps(qb, kb0, b[r][0]);
            b[r][1] = _mm512_fmadd_ps(qb, kb1, b[r][1]);
          }
        }
      }
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < 2; ++v) half[pair][r][v] = _mm512_add_ps(a[r][v], b[r][v]);
    }
    for (int r = 0; r < R; ++r) {
      for (int v = 0; v < 2; ++v) {
        const __m512 sq = _mm512_add_ps(half[0][r][v], half[1][r][v]);
        if (quad == 0) t01[r][v] = sq;
        else if (quad == 1) t01[r][v] = _mm512_add_ps(t01[r][v], sq);
        else if (quad == 2) t23[r][v] = sq;
        else t23[r][v] = _mm512_add_ps(t23[r][v], sq);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < 2; ++v) _mm512_storeu_ps(s[r] + 16 * v, _mm512_mul_ps(_mm512_add_ps(t01[r][v], t23[r][v]), scale));
}

// The value update of R rows that share `count` over one slice of NVB * 16 values at i0: per
// element the accumulator times the row's correction, then one fma per position in order (what
// attend_impl does per row); each V vector is loaded once for the R rows.
template <int NVB, int R>
inline void tile_values(float* const* acc, const float* const* p, const float* corr,
                        const float* const* vr, int count, int i0) {
  __m512 a[R][NVB];
  for (int r = 0; r < R; ++r) {
    const __m512 cr = _mm512_set1_ps(corr[r]);
    for (int c = 0; c < NVB; ++c) a[r][c] = _mm512_mul_ps(_mm512_loadu_ps(acc[r] + i0 + 16 * c), cr);
  }
  for (int j = 0; j < count; ++j) {
    __m512 v[NVB];
    for (int c = 0; c < NVB; ++c) v[c] = _mm512_loadu_ps(vr[j] + i0 + 16 * c);
    for (int r = 0; r < R; ++r) {
      const __m512 pj = _mm512_set1_ps(p[r][j]);
      for (int c = 0; c < NVB; ++c) a[r][c] = _mm512_fmadd_ps(pj, v[c], a[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NVB; ++c) _mm512_storeu_ps(acc[r] + i0 + 16 * c, a[r][c]);
}

template <int R>
inline void tile_values_rows(float* const* acc, const float* const* p, const float* corr,
                             const float* const* vr, int count, int dv) {
  int i0 = 0;
  for (; i0 + 64 <= dv; i0 += 64) tile_values<4, R>(acc, p, corr, vr, count, i0);
  switch ((dv - i0) / 16) {
    case 3: tile_values<3, R>(acc, p, corr, vr, count, i0); break;
    case 2: tile_values<2, R>(acc, p, corr, vr, count, i0); break;
    case 1: tile_values<1, R>(acc, p, corr, vr, count, i0); break;
    default: break;
  }
}

constexpr int kTileMaxRows = kAttendTileTokens * kAttendMaxHeads;

// Per chunk of 32 positions (the chunks of attend_impl): decode the K/V rows once, transpose K,
// then for every row still inside its n[t]: scores (pairs of rows), the softmax step
// (softmax_chunk), the value update (up to 4 rows of equal count at a time).
template <int KC, DType T>
void attend_tile_impl(const AttendTile& tl, float* scratch) {
  const int nq = tl.nq, nt = tl.nt, dk = tl.dk, dv = tl.dv, rows = nq * nt;
  float* scores = scratch;                         // [rows][kAttendChunk]
  float* acc = scores + rows * kAttendChunk;       // [rows][dv]
  float* kT = acc + rows * dv;                     // [dk][kAttendChunk]
  float* k_dec = kT + kAttendChunk * dk;           // [kAttendChunk][dk] (F16/Q8_0)
  float* v_dec = k_dec + kAttendChunk * dk;        // [kAttendChunk][dv] (F16/Q8_0)
  float running_max[kTileMaxRows], running_sum[kTileMaxRows], corr[kTileMaxRows + 16];
  int64_t n_max = 0;
  for (int t = 0; t < nt; ++t) n_max = tl.n[t] > n_max ? tl.n[t] : n_max;
  for (int r = 0; r < rows; ++r) {
    running_max[r] = -__builtin_inff();
    running_sum[r] = 0.0f;
    for (int i = 0; i < dv; i += 16) _mm512_storeu_ps(acc + r * dv + i, _mm512_setzero_ps());
  }
  const int kc = KC > 0 ? KC : dk / 16;
  const __m512 vscale = _mm512_set1_ps(tl.scale);
  const float* kr[kAttendChunk];
  const float* vr[kAttendChunk];
  int active[kTileMaxRows], count_of[kTileMaxRows];
  const float* q_of[kTileMaxRows];
  float* s_of[kTileMaxRows];
  float* acc_of[kTileMaxRows];
  for (int64_t start = 0; start < n_max; start += kAttendChunk) {
    const int count = static_cast<int>(n_max - start < kAttendChunk ? n_max - start : kAttendChunk);
    if constexpr (T == DType::F32) {
      for (int j = 0; j < count; ++j) {
        kr[j] = static_cast<const float*>(tl.k_rows[start + j]);
        vr[j] = static_cast<const float*>(tl.v_rows[start + j]);
      }
    } else {
      decode_rows<T>(tl.k_rows + start, count, dk, k_dec);
      decode_rows<T>(tl.v_rows + start, count, dv, v_dec);
      for (int j = 0; j < count; ++j) {
        kr[j] = k_dec + j * dk;
        vr[j] = v_dec + j * dv;
      }
    }
    transpose_keys(kr, count, dk, kT);
    int n_active = 0;
    for (int t = 0; t < nt; ++t) {
      if (tl.n[t] <= start) continue;
      const int ct = static_cast<int>(tl.n[t] - start < kAttendChunk ? tl.n[t] - start : kAttendChunk);
      for (int h = 0; h < nq; ++h) {
        const int r = t * nq + h;
        active[n_active] = r;
        count_of[n_active] = ct;
        q_of[n_active] = tl.q[r];
        s_of[n_active] = scores + r * kAttendChunk;
        acc_of[n_active] = acc + r * dv;
        ++n_active;
      }
    }
    int i = 0;
    for (; i + 2 <= n_active; i += 2) tile_scores<KC, 2>(q_of + i, kT, kc, vscale, s_of + i);
    if (i < n_active) tile_scores<KC, 1>(q_of + i, kT, kc, vscale, s_of + i);
    for (i = 0; i < n_active; i += 16)
      softmax_rows(n_active - i < 16 ? n_active - i : 16, s_of + i, count_of + i, active + i, running_max,
                   running_sum, corr + i);
    for (i = 0; i < n_active;) {
      int m = 1;
      while (m < 4 && i + m < n_active && count_of[i + m] == count_of[i]) ++m;
      const float* const* p = s_of + i;
      switch (m) {
        case 4: tile_values_rows<4>(acc_of + i, p, corr + i, vr, count_of[i], dv); break;
        case 3: tile_values_rows<3>(acc_of + i, p, corr + i, vr, count_of[i], dv); break;
        case 2: tile_values_rows<2>(acc_of + i, p, corr + i, vr, count_of[i], dv); break;
        default: tile_values_rows<1>(acc_of + i, p, corr + i, vr, count_of[i], dv); break;
      }
      i += m;
    }
  }
  for (int t = 0; t < nt; ++t) {
    const bool partial = tl.part_max && tl.part_max[t];
    for (int h = 0; h < nq; ++h) {
      const int r = t * nq + h;
      finish_row(acc + r * dv, dv, running_max[r], running_sum[r], partial ? nullptr : tl.sinks, h,
                 tl.out[r], partial ? tl.part_max[t] + h : nullptr, partial ? tl.part_sum[t] + h : nullptr);
    }
  }
}

template <DType T>
void attend_tile_typed(const AttendTile& tl, float* scratch) {
  if (tl.dk == 64) return attend_tile_impl<4, T>(tl, scratch);
  if (tl.dk == 128) return attend_tile_impl<8, T>(tl, scratch);
  attend_tile_impl<0, T>(tl, scratch);
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

void attend_tile_avx512(const AttendTile& tile, float* scratch) {
  switch (tile.type) {
    case DType::F16: return attend_tile_typed<DType::F16>(tile, scratch);
    case DType::Q8_0: return attend_tile_typed<DType::Q8_0>(tile, scratch);
    default: return attend_tile_typed<DType::F32>(tile, scratch);
  }
}

}  // namespace cadenza::simd::detail
