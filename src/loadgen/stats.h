// Order statistics of latency samples.
//
// Percentile method: linear interpolation between closest ranks, the same as numpy.percentile's
// default ("linear"): for samples sorted ascending x[0..n-1] and p in [0, 100], the rank is
// h = (n - 1) * p / 100 and the percentile is x[floor(h)] + (h - floor(h)) * (x[floor(h)+1] -
// x[floor(h)]). P0 is the minimum, P100 the maximum, P50 the median (mean of the two middle
// samples for even n).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace cadenza::loadgen {

// Precondition: `sorted` is ascending and non-empty, 0 <= p <= 100 (asserted).
double percentile_sorted(std::span<const double> sorted, double p);

struct Distribution {
  size_t count = 0;  // 0: every other field is 0
  double mean = 0, stddev = 0, min = 0, median = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
};

// Summary of `samples` (any order; NaNs are a bug). Empty input gives an all-zero Distribution.
Distribution summarize(std::vector<double> samples);

void to_json(nlohmann::json& j, const Distribution& d);
void from_json(const nlohmann::json& j, Distribution& d);  // missing fields stay 0

}  // namespace cadenza::loadgen
