// simd/sampling.h: the vector argmax / max / softmax weights against the scalar reference on
// random logits (with ties and masked -inf entries), at every ISA level this CPU has.
#include "kernels/simd/sampling.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "simd_test_util.h"

namespace cadenza::simd {
namespace {

using testing::IsaScope;
using testing::Rng;

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// Logits like a model's (normal, sd 3), with a few exact copies of the maximum (ties: the lowest
// index must win) and some masked entries.
std::vector<float> random_logits(Rng& rng, int64_t n, bool ties, bool masks) {
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = testing::normal(rng, 3.0f);
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  if (masks)
    for (int64_t i = 0; i < n / 10; ++i) x[static_cast<size_t>(pick(rng))] = kMasked;
  if (ties) {
    const float top = ref::max_value(x.data(), n) + 1.0f;
    for (int i = 0; i < 3; ++i) x[static_cast<size_t>(pick(rng))] = top;
  }
  return x;
}

class SamplingKernels : public ::testing::TestWithParam<Isa> {};

TEST_P(SamplingKernels, MatchTheReference) {
  IsaScope scope(GetParam());
  if (scope.got() != GetParam()) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
  SCOPED_TRACE(testing::seed_trace());
  Rng rng(testing::test_seed());
  for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 151936}) {
    for (int variant = 0; variant < 4; ++variant) {
      SCOPED_TRACE("n " + std::to_string(n) + " variant " + std::to_string(variant));
      const std::vector<float> x = random_logits(rng, n, variant & 1, variant & 2);
      EXPECT_EQ(argmax(x.data(), n), ref::argmax(x.data(), n));
      const float mx = max_value(x.data(), n);
      EXPECT_EQ(mx, ref::max_value(x.data(), n));
      if (mx == kMasked) continue;  // every entry masked: no softmax
      for (float inv_t : {1.0f, 0.5f, 10.0f}) {
        std::vector<float> w(x.size()), w_ref(x.size());
        const double z = softmax_weights(x.data(), n, mx, inv_t, w.data());
        const double z_ref = ref::softmax_weights(x.data(), n, mx, inv_t, w_ref.data());
        EXPECT_NEAR(z, z_ref, 2e-6 * z_ref);
        for (size_t i = 0; i < x.size(); ++i) {
          if (x[i] == kMasked) {
            ASSERT_EQ(w[i], 0.0f) << "masked entry " << i << " has weight";
            continue;
          }
          // Relative error ~2e-7 of the polynomial plus absolute slack for denormal-range values.
          ASSERT_NEAR(w[i], w_ref[i], 1e-6f * w_ref[i] + 1e-37f) << "entry " << i;
        }
      }
    }
  }
}

TEST_P(SamplingKernels, AllMaskedAndLastIndexMaximum) {
  IsaScope scope(GetParam());
  if (scope.got() != GetParam()) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
  for (int64_t n : {1, 5, 16, 40, 100}) {
    std::vector<float> x(static_cast<size_t>(n), kMasked);
    EXPECT_EQ(argmax(x.data(), n), 0);  // all equal: the lowest index
    EXPECT_EQ(max_value(x.data(), n), kMasked);
    x.back() = 0.0f;  // the maximum in the last (often partial) vector
    EXPECT_EQ(argmax(x.data(), n), n - 1);
    EXPECT_EQ(max_value(x.data(), n), 0.0f);
    std::vector<float> w(x.size(), -1.0f);
    EXPECT_EQ(softmax_weights(x.data(), n, 0.0f, 1.0f, w.data()), 1.0);
    for (int64_t i = 0; i + 1 < n; ++i) EXPECT_EQ(w[static_cast<size_t>(i)], 0.0f);
    EXPECT_EQ(w.back(), 1.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, SamplingKernels, ::testing::ValuesIn(testing::all_levels()),
                         testing::level_name);

}  // namespace
}  // namespace cadenza::simd
