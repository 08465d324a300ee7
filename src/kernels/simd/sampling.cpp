#include "kernels/simd/sampling.h"

#include <cassert>
#include <cmath>
#include <limits>

#include "kernels/simd/isa.h"

namespace cadenza::simd {

namespace ref {

int64_t argmax(const float* x, int64_t n) {
  assert(n >= 1);
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

float max_value(const float* x, int64_t n) {
  assert(n >= 1);
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

double softmax_weights(const float* x, int64_t n, float max, float inv_t, float* w) {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  double z = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float wi = x[i] != kMasked ? std::exp((x[i] - max) * inv_t) : 0.0f;
    w[i] = wi;
    z += wi;
  }
  return z;
}

}  // namespace ref

namespace {
bool vector_path() { return active_isa() >= Isa::avx512; }
}  // namespace

int64_t argmax(const float* x, int64_t n) {
  assert(n >= 1 && n <= std::numeric_limits<int32_t>::max());
  return vector_path() ? detail::argmax_avx512(x, n) : ref::argmax(x, n);
}

float max_value(const float* x, int64_t n) {
  assert(n >= 1);
  return vector_path() ? detail::max_value_avx512(x, n) : ref::max_value(x, n);
}

double softmax_weights(const float* x, int64_t n, float max, float inv_t, float* w) {
  return vector_path() ? detail::softmax_weights_avx512(x, n, max, inv_t, w)
                       : ref::softmax_weights(x, n, max, inv_t, w);
}

}  // namespace cadenza::simd
