// A Prometheus histogram: counts of observations per bucket, their sum and count, rendered as
// cumulative `_bucket{le="..."}` lines (the last one `le="+Inf"`), `_sum` and `_count`.
// Ownership: plain values; the bucket bounds are shared (many series of one family use one set).
// Thread-safety: none; the Registry (registry.h) or the owner serializes access.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wire/exposition.h"

namespace cadenza::wire {

class Histogram {
 public:
  // `bounds`: the buckets' upper bounds (inclusive: le), ascending, finite; +Inf is implicit.
  explicit Histogram(std::shared_ptr<const std::vector<double>> bounds);
  explicit Histogram(std::vector<double> bounds);

  // A NaN, infinite or negative observation counts as 0 (they only come from clock glitches, and
  // one NaN would poison the sum for good).
  void observe(double v);

  uint64_t count() const { return count_; }
  double sum() const { return sum_; }
  // Observations <= bounds()[i] (cumulative); i == bounds().size() is the +Inf bucket.
  uint64_t cumulative(size_t i) const;
  const std::vector<double>& bounds() const { return *bounds_; }

  // Appends `name_bucket{labels...,le="b"} n` per bound and +Inf, `name_sum{labels} s` and
  // `name_count{labels} n`.
  void render(const std::string& name, const Labels& labels, std::string& out) const;

 private:
  std::shared_ptr<const std::vector<double>> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last one is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

}  // namespace cadenza::wire
