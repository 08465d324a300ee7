// AVX2 bodies of recurrent.h: vectorised over the value dim (delta rule), the head dim (Mamba-2
// scan) and over channels (short conv), with the scalar reference's operation order (separate mul and add, no FMA), so
// the results are bit for bit the reference's. Tails run the reference's scalar loop.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/simd/recurrent.h"

namespace cadenza::simd::detail {

void delta_rule_step_avx2(float* S, const float* q, const float* k, const float* v, float decay,
                          float beta, int64_t dk, int64_t dv, float* out) {
  constexpr int64_t kBlock = 64;  // 8 registers of 8 lanes
  alignas(32) float d[kBlock];
  const __m256 vdecay = _mm256_set1_ps(decay), vbeta = _mm256_set1_ps(beta);
  for (int64_t j0 = 0; j0 < dv; j0 += kBlock) {
    const int64_t nj = dv - j0 < kBlock ? dv - j0 : kBlock;
    const int64_t nv = nj / 8 * 8;
    // Pass 1: decay and kv = S^T k for this column block.
    alignas(32) float kv[kBlock] = {};
    for (int64_t i = 0; i < dk; ++i) {
      float* row = S + i * dv + j0;
      const __m256 ki = _mm256_set1_ps(k[i]);
      int64_t j = 0;
      for (; j < nv; j += 8) {
        const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(row + j), vdecay);
        _mm256_storeu_ps(row + j, s);
        _mm256_store_ps(kv + j, _mm256_add_ps(_mm256_load_ps(kv + j), _mm256_mul_ps(s, ki)));
      }
      for (; j < nj; ++j) {
        row[j] = row[j] * decay;
        kv[j] = kv[j] + row[j] * k[i];
      }
    }
    int64_t j = 0;
    for (; j < nv; j += 8) {
      _mm256_store_ps(d + j, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v + j0 + j),
                                                         _mm256_load_ps(kv + j)), vbeta));
    }
    for (; j < nj; ++j) d[j] = (v[j0 + j] - kv[j]) * beta;
    // Pass 2: S += k d^T and out = S^T q.
    alignas(32) float o[kBlock] = {};
    for (int64_t i = 0; i < dk; ++i) {
      float* row = S + i * dv + j0;
      const __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
      j = 0;
      for (; j < nv; j += 8) {
        const __m256 s =
            _mm256_add_ps(_mm256_loadu_ps(row + j), _mm256_mul_ps(ki, _mm256_load_ps(d + j)));
        _mm256_storeu_ps(row + j, s);
        _mm256_store_ps(o + j, _mm256_add_ps(_mm256_load_ps(o + j), _mm256_mul_ps(s, qi)));
      }
      for (; j < nj; ++j) {
        row[j] = row[j] + k[i] * d[j];
        o[j] = o[j] + row[j] * q[i];
      }
    }
    std::memcpy(out + j0, o, static_cast<size_t>(nj) * sizeof(float));
  }
}

void ssm_scan_step_avx2(float* S, const float* x, const float* B, const float* C, float decay,
                        float dt, int64_t n, int64_t p, float* out) {
  constexpr int64_t kBlock = 64;  // 8 registers of 8 lanes
  const __m256 vdecay = _mm256_set1_ps(decay), vdt = _mm256_set1_ps(dt);
  for (int64_t j0 = 0; j0 < p; j0 += kBlock) {
    const int64_t nj = p - j0 < kBlock ? p - j0 : kBlock;
    const int64_t nv = nj / 8 * 8;
    alignas(32) float xdt[kBlock], o[kBlock] = {};
    int64_t j = 0;
    for (; j < nv; j += 8) _mm256_store_ps(xdt + j, _mm256_mul_ps(_mm256_loadu_ps(x + j0 + j), vdt));
    for (; j < nj; ++j) xdt[j] = x[j0 + j] * dt;
    for (int64_t i = 0; i < n; ++i) {
      float* row = S + i * p + j0;
      const __m256 bi = _mm256_set1_ps(B[i]), ci = _mm256_set1_ps(C[i]);
      j = 0;
      for (; j < nv; j += 8) {
        const __m256 s = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(row + j), vdecay),
                                       _mm256_mul_ps(bi, _mm256_load_ps(xdt + j)));
        _mm256_storeu_ps(row + j, s);
        _mm256_store_ps(o + j, _mm256_add_ps(_mm256_load_ps(o + j), _mm256_mul_ps(s, ci)));
      }
      for (; j < nj; ++j) {
        row[j] = row[j] * decay + B[i] * xdt[j];
        o[j] = o[j] + row[j] * C[i];
      }
    }
    std::memcpy(out + j0, o, static_cast<size_t>(nj) * sizeof(float));
  }
}

void short_conv_step_avx2(float* state, const float* x, const float* w, const float* bias,
                          int64_t K, int64_t C, float* out) {
  // Taps are strided by K in w: gather them per 8 channels (K is small, 4 in qwen35).
  const int64_t nv = C / 8 * 8;
  const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                         _mm256_set1_epi32(static_cast<int>(K)));
  int64_t c = 0;
  for (; c < nv; c += 8) {
    __m256 s = _mm256_setzero_ps();
    for (int64_t t = 0; t < K - 1; ++t) {
      const __m256 wt = _mm256_i32gather_ps(w + c * K + t, idx, 4);
      s = _mm256_add_ps(s, _mm256_mul_ps(wt, _mm256_loadu_ps(state + t * C + c)));
    }
    const __m256 wl = _mm256_i32gather_ps(w + c * K + K - 1, idx, 4);
    s = _mm256_add_ps(s, _mm256_mul_ps(wl, _mm256_loadu_ps(x + c)));
    if (bias) s = _mm256_add_ps(s, _mm256_loadu_ps(bias + c));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, s);
    for (int l = 0; l < 8; ++l) out[c + l] = lanes[l] / (1.0f + std::exp(-lanes[l]));
  }
  for (; c < C; ++c) {
    float s = 0.0f;
    for (int64_t t = 0; t < K - 1; ++t) s = s + w[c * K + t] * state[t * C + c];
    s = s + w[c * K + K - 1] * x[c];
    if (bias) s = s + bias[c];
    out[c] = s / (1.0f + std::exp(-s));
  }
  if (K > 1) {
    std::memmove(state, state + C, static_cast<size_t>((K - 2) * C) * sizeof(float));
    std::memcpy(state + (K - 2) * C, x, static_cast<size_t>(C) * sizeof(float));
  }
}

}  // namespace cadenza::simd::detail
