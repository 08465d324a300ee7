// The vocabulary-wide loops of token sampling (engine/sampler.cpp): argmax, max, and the softmax
// weights with their sum. A scalar reference (namespace ref) and an AVX-512 path, dispatched at
// run time on the active ISA level (isa.h): avx512 and above take the vector path.
//
// Contracts: x holds n floats, n >= 1, n <= INT32_MAX; no NaN (-inf is allowed: a masked logit).
//  - argmax: index of the largest value, the lowest index on ties. Exact at every level (only
//    comparisons), so the vector path returns what the reference returns.
//  - max_value: the largest value. Exact at every level.
//  - softmax_weights: w[i] = 0 where x[i] == -inf, else exp((x[i] - max) * inv_t); returns the sum
//    of the w[i] accumulated in double. Preconditions: max >= every x[i] and finite, inv_t > 0
//    and finite. The reference uses std::exp and sums in index order; the vector path uses a
//    polynomial exp (relative error ~2e-7) and sums 16 lanes in double, so weights and sum agree
//    with the reference to ~1e-6 relative, not bit for bit. Each level is deterministic: the same
//    input gives the same weights and sum, whatever else runs. w must not alias x.
// Thread-safety: pure functions (they read the active ISA level once per call).
#pragma once

#include <cstdint>

namespace cadenza::simd {

int64_t argmax(const float* x, int64_t n);
float max_value(const float* x, int64_t n);
double softmax_weights(const float* x, int64_t n, float max, float inv_t, float* w);

namespace ref {
int64_t argmax(const float* x, int64_t n);
float max_value(const float* x, int64_t n);
double softmax_weights(const float* x, int64_t n, float max, float inv_t, float* w);
}  // namespace ref

namespace detail {
int64_t argmax_avx512(const float* x, int64_t n);
float max_value_avx512(const float* x, int64_t n);
double softmax_weights_avx512(const float* x, int64_t n, float max, float inv_t, float* w);
}  // namespace detail

}  // namespace cadenza::simd
