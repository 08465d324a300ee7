// Kernels of linear-attention (recurrent) layers: the gated delta rule (Gated DeltaNet, Yang et
// al. 2024), the Mamba-2 state update (SSD, Dao and Gu 2024) and the short causal depthwise
// convolution in front of either (qwen35's linear layers, granitehybrid's Mamba-2 layers).
// One token of one sequence per call; the caller (the CPU backend's ops) walks a batch's tokens in
// order and parallelises over heads / channel blocks.
//
// delta_rule_step: S is one head's state, [dk][dv] row-major (row i: key dim i), updated in place:
//   S = decay * S;  kv = S^T k;  d = beta * (v - kv);  S = S + k d^T;  out = S^T q
// q and k come normalised (and q scaled) by the caller; decay = exp(g) in (0, 1].
// Reductions run over i in ascending order with separate multiplies and adds at every level, so
// the SIMD paths (vectorised over the value dim j) are bit for bit the scalar reference.
//
// ssm_scan_step: one Mamba-2 head; S is its state, [n][p] row-major (row i: state dim i, column
// j: head dim j), updated in place; x, out [p]; B, C [n]:
//   S = decay * S + B (dt x)^T;  out = S^T C
// (decay = exp(dt * A) and dt = softplus(dt_raw + dt_bias) come from the caller, which also adds
// the D skip). Reductions run over i ascending with separate multiplies and adds, vectorised over
// j, so the SIMD path is bit for bit the scalar reference.
//
// short_conv_step: state is [K-1][C] (the previous K-1 inputs, oldest first), x and out [C],
// w [C][K] (GGUF ssm_conv1d: kernel taps of channel c at w[c*K .. c*K+K-1], oldest first),
// bias [C] or null:
//   out[c] = silu(sum_k w[c][k] * window[k][c] (+ bias[c])),  window = state rows then x
// then the state shifts by one row (x becomes its newest). The sum runs over k ascending; the
// bias is added after it.
//
// Dispatch: the active ISA level (isa.h). Thread-safe (no shared state).
#pragma once

#include <cstdint>

namespace cadenza::simd {

void delta_rule_step(float* state, const float* q, const float* k, const float* v, float decay,
                     float beta, int64_t dk, int64_t dv, float* out);
void delta_rule_step_ref(float* state, const float* q, const float* k, const float* v,
                         float decay, float beta, int64_t dk, int64_t dv, float* out);

void ssm_scan_step(float* state, const float* x, const float* B, const float* C, float decay,
                   float dt, int64_t n, int64_t p, float* out);
void ssm_scan_step_ref(float* state, const float* x, const float* B, const float* C, float decay,
                       float dt, int64_t n, int64_t p, float* out);

void short_conv_step(float* state, const float* x, const float* w, const float* bias,
                     int64_t kernel, int64_t channels, float* out);
void short_conv_step_ref(float* state, const float* x, const float* w, const float* bias,
                         int64_t kernel, int64_t channels, float* out);

namespace detail {
// The AVX2 bodies (recurrent_avx2.cpp, built with -mavx2); call only at avx2 or above.
void delta_rule_step_avx2(float* state, const float* q, const float* k, const float* v,
                          float decay, float beta, int64_t dk, int64_t dv, float* out);
void ssm_scan_step_avx2(float* state, const float* x, const float* B, const float* C,
                        float decay, float dt, int64_t n, int64_t p, float* out);
void short_conv_step_avx2(float* state, const float* x, const float* w, const float* bias,
                          int64_t kernel, int64_t channels, float* out);
}  // namespace detail

}  // namespace cadenza::simd
