// Shared helpers of the SIMD kernel tests: the random seed, the ISA levels to cover, random
// weight rows of each type, and the float error bound of a dot product.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/simd/isa.h"
#include "tensor/blocks.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"

namespace cadenza::simd::testing {

// A fresh seed per run (std::random_device); reproduce a failure with CADENZA_TEST_SEED=<seed>.
// Tests print it with SCOPED_TRACE, so it shows in every failure message.
inline uint32_t test_seed() {
  static const uint32_t seed = [] {
    if (const char* env = std::getenv("CADENZA_TEST_SEED"); env && *env)
      return static_cast<uint32_t>(std::strtoul(env, nullptr, 10));
    return std::random_device{}();
  }();
  return seed;
}
inline std::string seed_trace() {
  return "seed " + std::to_string(test_seed()) + " (rerun with CADENZA_TEST_SEED=" +
         std::to_string(test_seed()) + ")";
}

// Every level; tests skip (visibly) the ones above what this CPU has.
inline std::vector<Isa> all_levels() {
  return {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_vnni, Isa::amx};
}
inline std::string level_name(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(isa_name(info.param));
}

// Sets the level for the duration of a test and restores the previous one.
class IsaScope {
 public:
  explicit IsaScope(Isa isa) : prev_(active_isa()) { got_ = set_isa(isa); }
  ~IsaScope() { set_isa(prev_); }
  Isa got() const { return got_; }

 private:
  Isa prev_;
  Isa got_;
};

using Rng = std::mt19937_64;

inline float normal(Rng& rng, float sigma = 1.0f) {
  return std::normal_distribution<float>(0.0f, sigma)(rng);
}
inline float uniform(Rng& rng, float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}
inline uint8_t rand_byte(Rng& rng) { return static_cast<uint8_t>(rng() & 0xff); }

// A random fp16 scale with magnitude in [lo, hi], random sign when `signed_`.
inline uint16_t rand_scale(Rng& rng, float lo, float hi, bool signed_) {
  float v = uniform(rng, lo, hi);
  if (signed_ && (rng() & 1)) v = -v;
  return fp32_to_fp16(v);
}

// Activations: N(0, s) with s log-uniform over 1e-2..1e2 per row, never all zero.
inline std::vector<float> random_activations(Rng& rng, int64_t n, int64_t k) {
  std::vector<float> x(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j) {
    const float s = std::pow(10.0f, uniform(rng, -2.0f, 2.0f));
    for (int64_t i = 0; i < k; ++i) x[j * k + i] = normal(rng, s);
  }
  return x;
}

// Random weight rows of type t: every bit of the quants is random (all codes occur, Q8_0's -128
// included), scales random in a realistic range. `realistic` instead quantizes N(0,1) floats with
// tensor/quant.h (searched K-quant scales, as files hold).
inline std::vector<uint8_t> random_weights(Rng& rng, DType t, int64_t rows, int64_t k,
                                           bool realistic) {
  const int64_t rb = static_cast<int64_t>(*row_bytes(t, k));
  std::vector<uint8_t> w(static_cast<size_t>(rows * rb));
  if (realistic || t == DType::F16 || t == DType::BF16) {
    std::vector<float> f(static_cast<size_t>(k));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : f) v = normal(rng, 0.05f);
      if (t == DType::F16 || t == DType::BF16) {
        for (int64_t i = 0; i < k; ++i) {
          const uint16_t h = t == DType::F16 ? fp32_to_fp16(f[i]) : fp32_to_bf16(f[i]);
          std::memcpy(&w[r * rb + 2 * i], &h, 2);
        }
      } else {
        quantize_row(t, f.data(), &w[r * rb], k);
      }
    }
    return w;
  }
  for (auto& b : w) b = rand_byte(rng);
  const int64_t nblocks = rows * k / traits(t).block_size;
  const size_t bs = traits(t).type_size;
  for (int64_t b = 0; b < nblocks; ++b) {
    uint8_t* p = &w[b * bs];
    uint16_t d = 0, dmin = 0;
    switch (t) {
      case DType::Q8_0:
      case DType::Q4_0:
      case DType::Q5_0:
        d = rand_scale(rng, 1e-4f, 5e-2f, true);
        std::memcpy(p, &d, 2);
        break;
      case DType::Q4_K:
        d = rand_scale(rng, 1e-4f, 1e-2f, false);
        dmin = rand_scale(rng, 1e-4f, 1e-2f, false);
        std::memcpy(p + offsetof(BlockQ4_K, d), &d, 2);
        std::memcpy(p + offsetof(BlockQ4_K, dmin), &dmin, 2);
        break;
      case DType::Q5_K:
        d = rand_scale(rng, 1e-4f, 1e-2f, false);
        dmin = rand_scale(rng, 1e-4f, 1e-2f, false);
        std::memcpy(p + offsetof(BlockQ5_K, d), &d, 2);
        std::memcpy(p + offsetof(BlockQ5_K, dmin), &dmin, 2);
        break;
      case DType::Q6_K:
        d = rand_scale(rng, 1e-5f, 1e-3f, true);
        std::memcpy(p + offsetof(BlockQ6_K, d), &d, 2);
        break;
      case DType::Q2_K:
        d = rand_scale(rng, 1e-4f, 1e-2f, false);
        dmin = rand_scale(rng, 1e-4f, 1e-2f, false);
        std::memcpy(p + offsetof(BlockQ2_K, d), &d, 2);
        std::memcpy(p + offsetof(BlockQ2_K, dmin), &dmin, 2);
        break;
      case DType::Q3_K:
        d = rand_scale(rng, 1e-5f, 1e-3f, true);
        std::memcpy(p + offsetof(BlockQ3_K, d), &d, 2);
        break;
      case DType::IQ4_XS:
        d = rand_scale(rng, 1e-5f, 1e-3f, true);
        std::memcpy(p + offsetof(BlockIQ4_XS, d), &d, 2);
        break;
      case DType::IQ4_NL:
        d = rand_scale(rng, 1e-5f, 1e-3f, true);
        std::memcpy(p, &d, 2);
        break;
      case DType::MXFP4:
        p[0] = static_cast<uint8_t>(110 + rng() % 20);  // scales 2^-17 .. 2^2
        break;
      case DType::IQ2_XXS:  // random grid indices, signs and scales; a random fp16 d (at 0)
      case DType::IQ2_XS:
      case DType::IQ2_S:
      case DType::IQ3_XXS:
      case DType::IQ3_S:
      case DType::IQ1_S:
        d = rand_scale(rng, 1e-5f, 1e-3f, true);
        std::memcpy(p, &d, 2);
        break;
      case DType::IQ1_M: {  // d's 4 nibbles are the top nibbles of the scale words (at 48)
        d = rand_scale(rng, 1e-5f, 1e-3f, true);
        for (int i = 0; i < 4; ++i) {
          uint16_t w16;
          std::memcpy(&w16, p + offsetof(BlockIQ1_M, scales) + 2 * i, 2);
          w16 = static_cast<uint16_t>((w16 & 0x0FFF) | (((d >> (4 * i)) & 0xF) << 12));
          std::memcpy(p + offsetof(BlockIQ1_M, scales) + 2 * i, &w16, 2);
        }
        break;
      }
      default: ADD_FAILURE() << "no random weights for " << dtype_name(t);
    }
  }
  return w;
}

// Bound on |computed - exact| for a dot product whose float arithmetic is: terms that each carry
// a few roundings (scale products, int -> float, the multiply), summed in some order along chains
// of at most `terms` additions. First-order rounding analysis: |error| <= (terms + c) * u * A with
// u = 2^-24 and A = the sum of the magnitudes of everything that is summed (abs_sum below, which
// bounds every partial sum whatever the order). The bound used is (terms + 8) * 2^-23 * A: twice
// that, so it also bounds the difference of two implementations (each within the bound of exact).
inline double dot_tolerance(int64_t terms, double abs_sum) {
  return static_cast<double>(terms + 8) * std::ldexp(1.0, -23) * abs_sum;
}

}  // namespace cadenza::simd::testing
