// The vectorized K-quant scale searches (tensor/quant_search_simd.inc) against the scalar
// reference (quant_kquants.cpp), on fixed-seed random data and edge cases: for every level this
// CPU runs (AVX2), the returned scale and min and every quant must equal the
// reference's bit for bit, for the shapes the encoders use (Q4_K/Q5_K: n=32, nmax 15/31,
// nstep 20; Q2_K: n=16, nmax 3, nstep 15; Q3_K/Q6_K: the symmetric search with nmax 4/32).
// A level the CPU lacks is skipped with a message, never silently.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/quant_impl.h"

namespace cadenza::quant_detail {
namespace {

struct Shape {
  int n, nmax;
  float rmin, rdelta;
  int nstep;
};
// What the encoders call (quant_kquants.cpp, quant_kquants_low.cpp), plus other n and nstep.
const Shape kMinShapes[] = {{32, 15, -1.0f, 0.1f, 20}, {32, 31, -0.5f, 0.1f, 15},
                            {32, 31, -1.0f, 0.1f, 20}, {16, 3, -0.5f, 0.1f, 15},
                            {16, 15, -1.0f, 0.1f, 20}, {7, 15, -1.0f, 0.1f, 31}};
const int kSymmetricNmax[] = {4, 32, 8, 16};

// Restores the level in effect when a test ends, so the order of the tests does not matter.
class SearchLevel : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    saved_ = search_level();
    if (!search_level_supported(GetParam()))
      GTEST_SKIP() << "this CPU lacks search level " << GetParam()
                   << " (AVX2+FMA)"
                   << ": that path is NOT checked here";
    ASSERT_EQ(set_search_level(GetParam()), GetParam());
  }
  void TearDown() override { set_search_level(saved_); }
  int saved_ = 0;
};

uint32_t bits(float v) { return std::bit_cast<uint32_t>(v); }

// Inputs: kind 0 normal, 1 uniform, 2 with one large outlier, 3 tiny values, 4 all zero,
// 5 constant, 6 all positive (min pinned at 0), 7 all negative.
std::vector<float> inputs(std::mt19937& rng, int n, int kind) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    float v = normal(rng);
    switch (kind) {
      case 1: v = uniform(rng); break;
      case 2: v = i == n / 3 ? 40.0f * v : v; break;
      case 3: v *= 1e-20f; break;
      case 4: v = 0.0f; break;
      case 5: v = 0.75f; break;
      case 6: v = std::fabs(v) + 0.5f; break;
      case 7: v = -std::fabs(v) - 0.1f; break;
      default: break;
    }
    x[static_cast<size_t>(i)] = v;
  }
  return x;
}

constexpr int kKinds = 8;

TEST_P(SearchLevel, FitScaleMinEqualsTheReferenceBitForBit) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> weight(0.0f, 3.0f);
  int checked = 0;
  for (const Shape& s : kMinShapes) {
    for (int kind = 0; kind < kKinds; ++kind) {
      for (int rep = 0; rep < 60; ++rep) {
        const std::vector<float> x = inputs(rng, s.n, kind);
        std::vector<float> w(x.size());
        for (size_t i = 0; i < w.size(); ++i) w[i] = rep % 3 == 0 ? x[i] * x[i] : weight(rng);
        std::vector<uint8_t> l_ref(32, 0xAA), l_vec(32, 0xAA), aux(32);
        float min_ref = -7.0f, min_vec = -7.0f;
        const float scale_ref = fit_scale_min_ref(s.n, s.nmax, x.data(), w.data(), l_ref.data(),
                                                  aux.data(), &min_ref, s.rmin, s.rdelta, s.nstep);
        const float scale_vec = fit_scale_min(s.n, s.nmax, x.data(), w.data(), l_vec.data(),
                                              aux.data(), &min_vec, s.rmin, s.rdelta, s.nstep);
        const std::string where = "n=" + std::to_string(s.n) + " nmax=" + std::to_string(s.nmax) +
                                  " nstep=" + std::to_string(s.nstep) +
                                  " kind=" + std::to_string(kind) + " rep=" + std::to_string(rep);
        ASSERT_EQ(bits(scale_vec), bits(scale_ref)) << where << ": " << scale_vec << " vs "
                                                    << scale_ref;
        ASSERT_EQ(bits(min_vec), bits(min_ref)) << where;
        ASSERT_EQ(l_vec, l_ref) << where;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 6 * kKinds * 60);
}

TEST_P(SearchLevel, FitScaleSymmetricEqualsTheReferenceBitForBit) {
  std::mt19937 rng(99);
  for (int nmax : kSymmetricNmax) {
    for (int n : {16, 32, 5}) {
      for (int kind = 0; kind < kKinds; ++kind) {
        for (int rep = 0; rep < 60; ++rep) {
          const std::vector<float> x = inputs(rng, n, kind);
          std::vector<uint8_t> l_ref(32, 0x55), l_vec(32, 0x55);
          const float scale_ref = fit_scale_symmetric_ref(n, nmax, x.data(), l_ref.data());
          const float scale_vec = fit_scale_symmetric(n, nmax, x.data(), l_vec.data());
          const std::string where = "n=" + std::to_string(n) + " nmax=" + std::to_string(nmax) +
                                    " kind=" + std::to_string(kind) + " rep=" + std::to_string(rep);
          ASSERT_EQ(bits(scale_vec), bits(scale_ref)) << where;
          ASSERT_EQ(l_vec, l_ref) << where;
        }
      }
    }
  }
}

// set_search_level really selected the level the equality tests above ran at (it caps a level
// the CPU lacks, which would leave those tests comparing the reference with itself).
TEST_P(SearchLevel, TheChosenLevelIsInEffect) { EXPECT_EQ(search_level(), GetParam()); }

INSTANTIATE_TEST_SUITE_P(Levels, SearchLevel, ::testing::Values(1),
                         [](const ::testing::TestParamInfo<int>&) { return std::string("avx2"); });

TEST(SearchLevelCap, ScalarLevelIsAlwaysSupportedAndUnsupportedOnesAreCapped) {
  const int saved = search_level();
  EXPECT_TRUE(search_level_supported(0));
  EXPECT_FALSE(search_level_supported(2));
  EXPECT_EQ(set_search_level(0), 0);
  EXPECT_EQ(search_level(), 0);
  const int top = set_search_level(5);
  EXPECT_TRUE(search_level_supported(top));
  set_search_level(saved);
}

}  // namespace
}  // namespace cadenza::quant_detail
