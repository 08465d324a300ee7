#include <vector>

#include <gtest/gtest.h>

#include "loadgen/stats.h"

namespace cadenza::loadgen {
namespace {

TEST(Percentile, LinearInterpolationLikeNumpy) {
  const std::vector<double> x{1, 2, 3, 4};
  // numpy.percentile([1,2,3,4], [0,25,50,90,99,100]) = [1, 1.75, 2.5, 3.7, 3.97, 4]
  EXPECT_DOUBLE_EQ(percentile_sorted(x, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile_sorted(x, 25), 1.75);
  EXPECT_DOUBLE_EQ(percentile_sorted(x, 50), 2.5);
  EXPECT_NEAR(percentile_sorted(x, 90), 3.7, 1e-12);
  EXPECT_NEAR(percentile_sorted(x, 99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(percentile_sorted(x, 100), 4.0);
}

TEST(Percentile, OddCountAndSingleSample) {
  const std::vector<double> x{10, 20, 30, 40, 50};
  EXPECT_DOUBLE_EQ(percentile_sorted(x, 50), 30.0);
  EXPECT_DOUBLE_EQ(percentile_sorted(x, 95), 48.0);  // h = 3.8 -> 40 + 0.8 * 10
  const std::vector<double> one{7};
  EXPECT_DOUBLE_EQ(percentile_sorted(one, 0), 7.0);
  EXPECT_DOUBLE_EQ(percentile_sorted(one, 99), 7.0);
}

TEST(Summarize, KnownSamples) {
  // 1..100 shuffled: mean 50.5, median 50.5, p90 90.1, p95 95.05, p99 99.01.
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  const Distribution d = summarize(v);
  EXPECT_EQ(d.count, 100u);
  EXPECT_DOUBLE_EQ(d.mean, 50.5);
  EXPECT_DOUBLE_EQ(d.median, 50.5);
  EXPECT_NEAR(d.p90, 90.1, 1e-9);
  EXPECT_NEAR(d.p95, 95.05, 1e-9);
  EXPECT_NEAR(d.p99, 99.01, 1e-9);
  EXPECT_DOUBLE_EQ(d.min, 1.0);
  EXPECT_DOUBLE_EQ(d.max, 100.0);
  EXPECT_EQ(summarize({}).count, 0u);
}

}  // namespace
}  // namespace cadenza::loadgen
