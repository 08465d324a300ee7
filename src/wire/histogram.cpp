#include "wire/histogram.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace cadenza::wire {

Histogram::Histogram(std::shared_ptr<const std::vector<double>> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_->size() + 1, 0) {
  assert(std::is_sorted(bounds_->begin(), bounds_->end()));
}

Histogram::Histogram(std::vector<double> bounds)
    : Histogram(std::make_shared<const std::vector<double>>(std::move(bounds))) {}

void Histogram::observe(double v) {
  if (!std::isfinite(v) || v < 0) v = 0;
  // The first bound >= v (le is inclusive); past the last one: the +Inf bucket.
  const size_t i = std::lower_bound(bounds_->begin(), bounds_->end(), v) - bounds_->begin();
  ++counts_[i];
  sum_ += v;
  ++count_;
}

uint64_t Histogram::cumulative(size_t i) const {
  uint64_t n = 0;
  for (size_t b = 0; b <= i && b < counts_.size(); ++b) n += counts_[b];
  return n;
}

void Histogram::render(const std::string& name, const Labels& labels, std::string& out) const {
  Labels with_le = labels;
  with_le.emplace_back("le", "");
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    cumulative += counts_[i];
    with_le.back().second = i < bounds_->size() ? format_value((*bounds_)[i]) : "+Inf";
    write_sample(out, name + "_bucket", with_le, static_cast<double>(cumulative));
  }
  write_sample(out, name + "_sum", labels, sum_);
  write_sample(out, name + "_count", labels, static_cast<double>(count_));
}

}  // namespace cadenza::wire
