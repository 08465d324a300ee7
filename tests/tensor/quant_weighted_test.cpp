// Importance-weighted encoding (tensor/quant.h quantize_row_weighted) on fixed-seed random data:
//  - every type's blocks decode (through the same scalar readers as any file's) to values whose
//    importance-weighted squared error is below the plain encoder's on the same row;
//  - with strongly uneven importance the gain is large (the important channels are kept closer);
//  - the symmetric 32-blocks (Q4_0, Q5_0, IQ4_NL) reach the weighted optimum over their scale: no
//    fp16 scale found by brute force does better (beyond the fp16 rounding of the optimum);
//  - a type without a weighted search encodes exactly as quantize_row does.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/dtype.h"
#include "tensor/iq_grids.h"
#include "tensor/quant.h"

namespace cadenza {
namespace {

constexpr int64_t kRow = 1024;

std::vector<float> random_row(std::mt19937& rng, int kind) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kRow));
  for (int64_t i = 0; i < kRow; ++i) {
    float v = normal(rng);
    if (kind == 1) v = uniform(rng);
    if (kind == 2 && i % 97 == 0) v *= 12.0f;  // outliers
    if (kind == 3) v = v * 0.02f + 0.01f;     // small, offset
    x[static_cast<size_t>(i)] = v;
  }
  return x;
}

// Importance as an imatrix has it: a few channels far above the rest (log-normal spread).
std::vector<float> random_importance(std::mt19937& rng, float spread) {
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> w(static_cast<size_t>(kRow));
  for (float& v : w) v = std::exp(normal(rng));
  return w;
}

double weighted_error(DType t, const std::vector<uint8_t>& blocks, const std::vector<float>& x,
                      const std::vector<float>& w) {
  std::vector<float> y(x.size());
  dequantize_row(t, blocks.data(), y.data(), kRow);
  double err = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(std::isfinite(y[i])) << dtype_name(t) << " element " << i;
    err += static_cast<double>(w[i]) * (x[i] - y[i]) * (x[i] - y[i]);
  }
  return err;
}

const DType kWeighted[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL,
                           DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                           DType::IQ4_XS};

TEST(QuantWeighted, LowerWeightedErrorThanThePlainEncoderForEveryType) {
  for (const DType t : kWeighted) {
    ASSERT_TRUE(has_weighted_quantizer(t)) << dtype_name(t);
    std::mt19937 rng(1234);
    const size_t bytes = static_cast<size_t>(*row_bytes(t, kRow));
    double plain_total = 0, weighted_total = 0, plain_uniform = 0, weighted_uniform = 0;
    for (int r = 0; r < 24; ++r) {
      const std::vector<float> x = random_row(rng, r % 4);
      const std::vector<float> w = random_importance(rng, 1.5f);
      const std::vector<float> ones(static_cast<size_t>(kRow), 1.0f);
      std::vector<uint8_t> plain(bytes), weighted(bytes), weighted_flat(bytes);
      quantize_row(t, x.data(), plain.data(), kRow);
      quantize_row_weighted(t, x.data(), weighted.data(), kRow, w.data());
      quantize_row_weighted(t, x.data(), weighted_flat.data(), kRow, ones.data());
      const double e_plain = weighted_error(t, plain, x, w);
      const double e_weighted = weighted_error(t, weighted, x, w);
      // Row by row, never meaningfully worse than the plain encoder.
      EXPECT_LE(e_weighted, e_plain * 1.001) << dtype_name(t) << " row " << r;
      plain_total += e_plain;
      weighted_total += e_weighted;
      plain_uniform += weighted_error(t, plain, x, ones);
      weighted_uniform += weighted_error(t, weighted_flat, x, ones);
    }
    // Uneven importance: a clear gain (measured 15-40% depending on the type).
    EXPECT_LT(weighted_total, 0.92 * plain_total) << dtype_name(t);
    // Even importance: the search alone is at least as good as the plain one.
    EXPECT_LE(weighted_uniform, plain_uniform * 1.001) << dtype_name(t);
    std::printf("%-7s weighted error / plain: %.3f (uneven importance), %.3f (even)\n",
                std::string(dtype_name(t)).c_str(), weighted_total / plain_total,
                weighted_uniform / plain_uniform);
  }
}

// Brute force over fp16 scales for one 32-block: the least weighted error of any stored scale,
// each element at its nearest level.
double brute_force_block(DType t, const float* x, const float* w) {
  double best = INFINITY;
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  // Every finite fp16 scale within a generous range of the max-anchored one.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float d = fp16_to_fp32(static_cast<uint16_t>(h));
    if (!std::isfinite(d) || d == 0.0f) continue;
    const float rel = std::fabs(d) * (t == DType::IQ4_NL ? 127.0f : (t == DType::Q4_0 ? 8.0f : 16.0f)) / amax;
    if (rel < 0.3f || rel > 2.0f) continue;
    double err = 0;
    for (int i = 0; i < 32; ++i) {
      double best_level = INFINITY;
      if (t == DType::IQ4_NL) {
        for (int8_t v : iq::kIq4nlValues) best_level = std::min(best_level, std::pow(static_cast<double>(x[i]) - static_cast<double>(d) * v, 2.0));
      } else {
        const int lo = t == DType::Q4_0 ? -8 : -16, hi = t == DType::Q4_0 ? 7 : 15;
        for (int v = lo; v <= hi; ++v) best_level = std::min(best_level, std::pow(static_cast<double>(x[i]) - static_cast<double>(d) * v, 2.0));
      }
      err += w[i] * best_level;
    }
    best = std::min(best, err);
  }
  return best;
}

TEST(QuantWeighted, SymmetricBlocksReachTheOptimumOverTheScale) {
  for (const DType t : {DType::Q4_0, DType::Q5_0, DType::IQ4_NL}) {
    std::mt19937 rng(99);
    const size_t bytes = static_cast<size_t>(*row_bytes(t, 32));
    for (int b = 0; b < 6; ++b) {
      std::vector<float> x = random_row(rng, b % 3);
      std::vector<float> w = random_importance(rng, 1.0f);
      std::vector<uint8_t> out(bytes);
      quantize_row_weighted(t, x.data(), out.data(), 32, w.data());
      std::vector<float> y(32);
      dequantize_row(t, out.data(), y.data(), 32);
      double ours = 0;
      for (int i = 0; i < 32; ++i) ours += w[static_cast<size_t>(i)] * std::pow(static_cast<double>(x[static_cast<size_t>(i)]) - y[static_cast<size_t>(i)], 2.0);
      const double brute = brute_force_block(t, x.data(), w.data());
      // The optimum's scale is rounded to fp16 (2^-11 relative), which may cost a little.
      EXPECT_LE(ours, brute * 1.002 + 1e-12) << dtype_name(t) << " block " << b;
    }
  }
}

TEST(QuantWeighted, OtherTypesEncodeAsThePlainEncoder) {
  std::mt19937 rng(5);
  const std::vector<float> x = random_row(rng, 0);
  const std::vector<float> w = random_importance(rng, 1.0f);
  for (const DType t : {DType::Q8_0, DType::MXFP4, DType::F16}) {
    EXPECT_FALSE(has_weighted_quantizer(t));
    const size_t bytes = static_cast<size_t>(*row_bytes(t, kRow));
    std::vector<uint8_t> a(bytes), b(bytes);
    quantize_row(t, x.data(), a.data(), kRow);
    quantize_row_weighted(t, x.data(), b.data(), kRow, w.data());
    EXPECT_EQ(a, b) << dtype_name(t);
  }
}

}  // namespace
}  // namespace cadenza
