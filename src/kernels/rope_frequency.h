// The per-pair RoPE frequency of RopeParams (backend.h), plain or YaRN-blended: one definition
// that the CPU backend (cpu/ops.cpp) and the CUDA kernel (cuda/ops.cu) both evaluate, in double.
// Plain C++ with no project headers, so nvcc compiles it as a __host__ __device__ function.
#pragma once

#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define CADENZA_ROPE_HD __host__ __device__
#else
#define CADENZA_ROPE_HD
#endif

namespace cadenza::kernels {

// The scalar values of RopeParams that the frequency depends on, and YaRN's correction range.
struct RopeFrequency {
  int32_t n_dims = 0;
  double freq_base = 10000.0;
  double freq_scale = 1.0;
  double ext_factor = 0.0;
  double low = 0.0, high = 0.0;  // YaRN correction range in pairs (rope_yarn_range)
};

// The pair whose wavelength turns `rotations` times in orig_ctx positions, as a real number.
CADENZA_ROPE_HD inline double rope_yarn_pair(int32_t n_dims, double freq_base, int32_t orig_ctx,
                                             double rotations) {
  return n_dims * log(orig_ctx / (rotations * 2.0 * 3.14159265358979323846)) / (2.0 * log(freq_base));
}

// Fills f.low / f.high from beta_fast / beta_slow (floor / ceil, clamped to [0, n_dims - 1]).
CADENZA_ROPE_HD inline void rope_yarn_range(RopeFrequency& f, int32_t orig_ctx, double beta_fast,
                                            double beta_slow) {
  const double low = floor(rope_yarn_pair(f.n_dims, f.freq_base, orig_ctx, beta_fast));
  const double high = ceil(rope_yarn_pair(f.n_dims, f.freq_base, orig_ctx, beta_slow));
  f.low = low < 0.0 ? 0.0 : low;
  f.high = high > f.n_dims - 1 ? f.n_dims - 1 : high;
}

// From RopeParams' values (YaRN's range only when ext_factor > 0 and orig_ctx > 0).
CADENZA_ROPE_HD inline RopeFrequency make_rope_frequency(int32_t n_dims, double freq_base,
                                                         double freq_scale, double ext_factor,
                                                         double beta_fast, double beta_slow,
                                                         int32_t orig_ctx) {
  RopeFrequency f;
  f.n_dims = n_dims;
  f.freq_base = freq_base;
  f.freq_scale = freq_scale;
  if (ext_factor > 0.0 && orig_ctx > 0) {
    f.ext_factor = ext_factor;
    rope_yarn_range(f, orig_ctx, beta_fast, beta_slow);
  }
  return f;
}

// inv_freq of pair i (see RopeParams); `factor` is freq_factors[i] or 1.
CADENZA_ROPE_HD inline double rope_inv_freq(const RopeFrequency& f, int32_t i, double factor) {
  const double extrapolated = pow(f.freq_base, -2.0 * i / f.n_dims) / factor;
  const double interpolated = f.freq_scale * extrapolated;
  if (f.ext_factor == 0.0) return interpolated;
  const double span = f.high - f.low > 0.001 ? f.high - f.low : 0.001;
  double ramp = (i - f.low) / span;
  ramp = ramp < 0.0 ? 0.0 : (ramp > 1.0 ? 1.0 : ramp);
  const double mix = (1.0 - ramp) * f.ext_factor;
  return interpolated * (1.0 - mix) + extrapolated * mix;
}

}  // namespace cadenza::kernels
