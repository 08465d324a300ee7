#include "loadgen/stats.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include <nlohmann/json.hpp>

namespace cadenza::loadgen {

double percentile_sorted(std::span<const double> sorted, double p) {
  assert(!sorted.empty() && p >= 0.0 && p <= 100.0);
  const double h = static_cast<double>(sorted.size() - 1) * p / 100.0;
  const size_t lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  const double frac = h - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

Distribution summarize(std::vector<double> samples) {
  Distribution d;
  if (samples.empty()) return d;
  std::sort(samples.begin(), samples.end());
  d.count = samples.size();
  double sum = 0;
  for (double x : samples) sum += x;
  d.mean = sum / static_cast<double>(d.count);
  double var = 0;
  for (double x : samples) var += (x - d.mean) * (x - d.mean);
  d.stddev = d.count > 1 ? std::sqrt(var / static_cast<double>(d.count - 1)) : 0.0;
  d.min = samples.front();
  d.max = samples.back();
  d.median = percentile_sorted(samples, 50);
  d.p90 = percentile_sorted(samples, 90);
  d.p95 = percentile_sorted(samples, 95);
  d.p99 = percentile_sorted(samples, 99);
  return d;
}

void to_json(nlohmann::json& j, const Distribution& d) {
  j = nlohmann::json{{"count", d.count}, {"mean", d.mean},     {"stddev", d.stddev},
                     {"min", d.min},     {"median", d.median}, {"p90", d.p90},
                     {"p95", d.p95},     {"p99", d.p99},       {"max", d.max}};
}

void from_json(const nlohmann::json& j, Distribution& d) {
  d = Distribution{};
  if (!j.is_object()) return;
  d.count = j.value("count", size_t{0});
  d.mean = j.value("mean", 0.0);
  d.stddev = j.value("stddev", 0.0);
  d.min = j.value("min", 0.0);
  d.median = j.value("median", 0.0);
  d.p90 = j.value("p90", 0.0);
  d.p95 = j.value("p95", 0.0);
  d.p99 = j.value("p99", 0.0);
  d.max = j.value("max", 0.0);
}

}  // namespace cadenza::loadgen
