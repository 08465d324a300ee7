// Scalar references and dispatch of recurrent.h.
#include "kernels/simd/recurrent.h"

#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/simd/isa.h"

namespace cadenza::simd {

void delta_rule_step_ref(float* S, const float* q, const float* k, const float* v, float decay,
                         float beta, int64_t dk, int64_t dv, float* out) {
  // kv accumulates in `out` (then becomes d), the output in a second pass.
  for (int64_t j = 0; j < dv; ++j) out[j] = 0.0f;
  for (int64_t i = 0; i < dk; ++i) {
    float* row = S + i * dv;
    for (int64_t j = 0; j < dv; ++j) {
      row[j] = row[j] * decay;
      out[j] = out[j] + row[j] * k[i];
    }
  }
  for (int64_t j = 0; j < dv; ++j) out[j] = (v[j] - out[j]) * beta;  // d
  // d is needed while out is rebuilt: update S row by row, keeping d in a small stack block.
  constexpr int64_t kBlock = 64;
  float d[kBlock], o[kBlock];
  for (int64_t j0 = 0; j0 < dv; j0 += kBlock) {
    const int64_t nj = dv - j0 < kBlock ? dv - j0 : kBlock;
    std::memcpy(d, out + j0, static_cast<size_t>(nj) * sizeof(float));
    for (int64_t j = 0; j < nj; ++j) o[j] = 0.0f;
    for (int64_t i = 0; i < dk; ++i) {
      float* row = S + i * dv + j0;
      for (int64_t j = 0; j < nj; ++j) {
        row[j] = row[j] + k[i] * d[j];
        o[j] = o[j] + row[j] * q[i];
      }
    }
    std::memcpy(out + j0, o, static_cast<size_t>(nj) * sizeof(float));
  }
}

void ssm_scan_step_ref(float* S, const float* x, const float* B, const float* C, float decay,
                       float dt, int64_t n, int64_t p, float* out) {
  constexpr int64_t kBlock = 64;
  float xdt[kBlock], o[kBlock];
  for (int64_t j0 = 0; j0 < p; j0 += kBlock) {
    const int64_t nj = p - j0 < kBlock ? p - j0 : kBlock;
    for (int64_t j = 0; j < nj; ++j) {
      xdt[j] = x[j0 + j] * dt;
      o[j] = 0.0f;
    }
    for (int64_t i = 0; i < n; ++i) {
      float* row = S + i * p + j0;
      for (int64_t j = 0; j < nj; ++j) {
        row[j] = row[j] * decay + B[i] * xdt[j];
        o[j] = o[j] + row[j] * C[i];
      }
    }
    std::memcpy(out + j0, o, static_cast<size_t>(nj) * sizeof(float));
  }
}

void short_conv_step_ref(float* state, const float* x, const float* w, const float* bias,
                         int64_t K, int64_t C, float* out) {
  assert(K >= 1);
  for (int64_t c = 0; c < C; ++c) {
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

void delta_rule_step(float* S, const float* q, const float* k, const float* v, float decay,
                     float beta, int64_t dk, int64_t dv, float* out) {
  if (active_isa() >= Isa::avx2) {
    detail::delta_rule_step_avx2(S, q, k, v, decay, beta, dk, dv, out);
  } else {
    delta_rule_step_ref(S, q, k, v, decay, beta, dk, dv, out);
  }
}

void ssm_scan_step(float* S, const float* x, const float* B, const float* C, float decay,
                   float dt, int64_t n, int64_t p, float* out) {
  if (active_isa() >= Isa::avx2) {
    detail::ssm_scan_step_avx2(S, x, B, C, decay, dt, n, p, out);
  } else {
    ssm_scan_step_ref(S, x, B, C, decay, dt, n, p, out);
  }
}

void short_conv_step(float* state, const float* x, const float* w, const float* bias, int64_t K,
                     int64_t C, float* out) {
  if (active_isa() >= Isa::avx2) {
    detail::short_conv_step_avx2(state, x, w, bias, K, C, out);
  } else {
    short_conv_step_ref(state, x, w, bias, K, C, out);
  }
}

}  // namespace cadenza::simd
