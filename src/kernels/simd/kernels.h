// SIMD dot-product kernels for quantized weights: activation quantization, GEMV and small-batch
// GEMM, with a scalar reference and run-time dispatch to the best ISA level (kernels/simd/isa.h).
//
// Weight/activation pairs (out = W x, one dot product per weight row):
//   weights Q8_0, Q4_0   x activations Q8_0 (quantize_q8_0)
//   weights Q4_K, Q6_K, Q2_K, Q3_K, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M
//                                             x activations Q8_K (quantize_q8_k)
//   weights IQ4_NL, MXFP4                     x activations Q8_0
//   weights F16, BF16    x activations f32
//
// Common contracts (asserted in debug builds; violating them is a bug in the caller):
//  - k is the row length in elements: a multiple of 32 (Q8_0, Q4_0, IQ4_NL, MXFP4), of 256
//    (Q4_K, Q6_K, Q2_K, Q3_K and the IQ1/IQ2/IQ3/IQ4_XS types), any
//    k >= 1 for F16/BF16. rows >= 0, n >= 1.
//  - `weights` holds `rows` consecutive rows in GGUF layout (tensor/blocks.h), row r starting at
//    r * row_bytes(type, k). No alignment is required for any pointer.
//  - Quantized activations: n consecutive rows of k elements as produced by quantize_q8_0 /
//    quantize_q8_k (row j at j * row_bytes(Q8_0|Q8_K, k)). Activation quants must lie in
//    -127..127 (both quantizers guarantee it; -128 would break the sign trick of the kernels).
//    f32 activations: n rows of k floats, row j at x + j * k. All inputs finite.
//  - gemv: out[r] = dot(weight row r, activation), r in [0, rows).
//    gemm: out[j * ldo + r] = dot(weight row r, activation row j), ldo >= rows.
//    Outputs must not alias inputs.
//  - To split work across threads, give each thread a row range: weights advanced by r0 rows,
//    out advanced by r0; results do not depend on the split.
//
// Determinism: each kernel accumulates a row in a fixed order, so results are reproducible for
// one ISA level, and batch invariant: gemm(n) row j is bitwise gemv of activation j, whatever n
// and whatever the row range. Different ISA levels round differently (the integer dot products are
// exact; the float scaling/summation order differs); tests/kernels bound the difference.
//
// Thread-safety: all functions are pure apart from reading the active ISA level.
#pragma once

#include <cstdint>
#include <optional>

#include "tensor/dtype.h"
#include "util/result.h"

namespace cadenza::simd {

// --- Activation quantization (f32 row of k elements -> blocks) ---
// Both produce exactly what tensor/quant.h quantize_row(Q8_0 / Q8_K) produces (bit for bit, at
// every ISA level), so either may quantize activations for these kernels.
// Q8_0: per 32 elements d = amax / 127 (stored fp16), q = round-half-away(x * (1/d)) in
// -127..127 (all-zero block: d = 0, q = 0). dst holds k / 32 BlockQ8_0 (34 bytes each).
void quantize_q8_0(const float* x, int64_t k, void* dst);
// Q8_K: per 256 elements iscale = -127 / max (max: the first element of largest magnitude),
// q = round-half-even(iscale * x), d = 1 / iscale (fp32), bsums[g] = sum of q[16g .. 16g+15].
// dst holds k / 256 BlockQ8_K (292 bytes each).
void quantize_q8_k(const float* x, int64_t k, void* dst);

// --- GEMV: one activation row ---
void gemv_q8_0(const void* weights, int64_t rows, int64_t k, const void* act_q8_0, float* out);
void gemv_q4_0(const void* weights, int64_t rows, int64_t k, const void* act_q8_0, float* out);
void gemv_q4_k(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, float* out);
void gemv_q6_k(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, float* out);
void gemv_f16(const void* weights, int64_t rows, int64_t k, const float* x, float* out);
void gemv_bf16(const void* weights, int64_t rows, int64_t k, const float* x, float* out);
void gemv_q2_k(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, float* out);
void gemv_iq2_xxs(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, float* out);
void gemv_iq2_xs(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, float* out);
void gemv_iq2_s(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, float* out);
void gemv_iq3_xxs(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, float* out);
void gemv_iq3_s(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, float* out);
void gemv_iq1_s(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, float* out);
void gemv_iq1_m(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, float* out);
void gemv_q3_k(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, float* out);
void gemv_iq4_xs(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, float* out);
void gemv_iq4_nl(const void* weights, int64_t rows, int64_t k, const void* act_q8_0, float* out);
void gemv_mxfp4(const void* weights, int64_t rows, int64_t k, const void* act_q8_0, float* out);

// --- GEMM: n activation rows, each weight row read from memory once for all n ---
void gemm_q8_0(const void* weights, int64_t rows, int64_t k, const void* act_q8_0, int64_t n,
               float* out, int64_t ldo);
void gemm_q4_0(const void* weights, int64_t rows, int64_t k, const void* act_q8_0, int64_t n,
               float* out, int64_t ldo);
void gemm_q4_k(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, int64_t n,
               float* out, int64_t ldo);
void gemm_q6_k(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, int64_t n,
               float* out, int64_t ldo);
void gemm_f16(const void* weights, int64_t rows, int64_t k, const float* x, int64_t n, float* out,
              int64_t ldo);
void gemm_bf16(const void* weights, int64_t rows, int64_t k, const float* x, int64_t n,
               float* out, int64_t ldo);
void gemm_iq2_xxs(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, int64_t n,
                  float* out, int64_t ldo);
void gemm_iq2_xs(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, int64_t n,
              float* out, int64_t ldo);
void gemm_iq2_s(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, int64_t n,
              float* out, int64_t ldo);
void gemm_iq3_xxs(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, int64_t n,
              float* out, int64_t ldo);
void gemm_iq3_s(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, int64_t n,
              float* out, int64_t ldo);
void gemm_iq1_s(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, int64_t n,
                float* out, int64_t ldo);
void gemm_iq1_m(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, int64_t n,
                float* out, int64_t ldo);
void gemm_q2_k(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, int64_t n,
               float* out, int64_t ldo);
void gemm_q3_k(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, int64_t n,
               float* out, int64_t ldo);
void gemm_iq4_xs(const void* weights, int64_t rows, int64_t k, const void* act_q8_k, int64_t n,
                 float* out, int64_t ldo);
void gemm_iq4_nl(const void* weights, int64_t rows, int64_t k, const void* act_q8_0, int64_t n,
                 float* out, int64_t ldo);
void gemm_mxfp4(const void* weights, int64_t rows, int64_t k, const void* act_q8_0, int64_t n,
                float* out, int64_t ldo);

// --- By weight type (for backends that hold a DType) ---
// The activation format a weight type's kernels take: Q8_0, Q8_K or F32; nullopt when there is
// no kernel for the type.
std::optional<DType> activation_dtype(DType weight);
// Bytes of one activation row of k elements in activation_dtype(weight) (f32: 4 * k).
// Error when the type has no kernel or k is not a multiple of its block size.
Result<int64_t> activation_row_bytes(DType weight, int64_t k);
// Quantizes n rows of k floats (row j at x + j * k) into act (activation_dtype(weight) rows, see
// activation_row_bytes); for F16/BF16 weights it copies nothing and returns ok (pass x as act).
Status quantize_activations(DType weight, const float* x, int64_t k, int64_t n, void* act);
// gemm for a weight type; act is as produced by quantize_activations (F16/BF16: the f32 rows).
// Error when the type has no kernel or the shapes break the contracts above.
Status gemm(DType weight, const void* weights, int64_t rows, int64_t k, const void* act,
            int64_t n, float* out, int64_t ldo);

// --- Scalar references: the ground truth the SIMD levels are tested against ---
// Same contracts and outputs as above; plain C++, summation order documented in ref.cpp.
namespace ref {
void quantize_q8_0(const float* x, int64_t k, void* dst);
void quantize_q8_k(const float* x, int64_t k, void* dst);
void gemm_q8_0(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
               float* out, int64_t ldo);
void gemm_q4_0(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
               float* out, int64_t ldo);
void gemm_q4_k(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
               float* out, int64_t ldo);
void gemm_q6_k(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
               float* out, int64_t ldo);
void gemm_f16(const void* weights, int64_t rows, int64_t k, const float* x, int64_t n, float* out,
              int64_t ldo);
void gemm_bf16(const void* weights, int64_t rows, int64_t k, const float* x, int64_t n,
               float* out, int64_t ldo);
void gemm_iq2_xxs(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
                  float* out, int64_t ldo);
void gemm_iq2_xs(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
              float* out, int64_t ldo);
void gemm_iq2_s(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
              float* out, int64_t ldo);
void gemm_iq3_xxs(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
              float* out, int64_t ldo);
void gemm_iq3_s(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
              float* out, int64_t ldo);
void gemm_iq1_s(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
                float* out, int64_t ldo);
void gemm_iq1_m(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
                float* out, int64_t ldo);
void gemm_q2_k(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
               float* out, int64_t ldo);
void gemm_q3_k(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
               float* out, int64_t ldo);
void gemm_iq4_xs(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
                 float* out, int64_t ldo);
void gemm_iq4_nl(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
                 float* out, int64_t ldo);
void gemm_mxfp4(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
                float* out, int64_t ldo);
}  // namespace ref

}  // namespace cadenza::simd
