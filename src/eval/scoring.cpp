#include "eval/scoring.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

namespace cadenza::eval {

void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  assert(!logits.empty());
  out.resize(logits.size());
  double max = -std::numeric_limits<double>::infinity();
  for (float x : logits) max = std::max(max, static_cast<double>(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const double log_z = max + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - log_z;
}

TopK top_k(std::span<const double> logp, int32_t k) {
  assert(k >= 1);
  const size_t n = std::min(logp.size(), static_cast<size_t>(k));
  std::vector<int32_t> ids(logp.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto before = [&](int32_t a, int32_t b) {
    return logp[static_cast<size_t>(a)] > logp[static_cast<size_t>(b)] ||
           (logp[static_cast<size_t>(a)] == logp[static_cast<size_t>(b)] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), before);
  TopK r;
  r.top.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    r.top.push_back({.id = ids[i], .logprob = static_cast<float>(logp[static_cast<size_t>(ids[i])])});
  }
  // log-sum-exp over the ids outside the top, relative to the largest of them.
  if (n == logp.size()) {
    r.rest_logmass = -std::numeric_limits<double>::infinity();
    return r;
  }
  double max = -std::numeric_limits<double>::infinity();
  for (size_t i = n; i < ids.size(); ++i) max = std::max(max, logp[static_cast<size_t>(ids[i])]);
  double sum = 0;
  for (size_t i = n; i < ids.size(); ++i) sum += std::exp(logp[static_cast<size_t>(ids[i])] - max);
  r.rest_logmass = max + std::log(sum);
  return r;
}

double kl_divergence(std::span<const TopEntry> base_top, double base_rest_logmass,
                     std::span<const double> model_logp) {
  double kl = 0;
  for (const TopEntry& e : base_top) {
    assert(e.id >= 0 && static_cast<size_t>(e.id) < model_logp.size());
    const double lp = e.logprob, lq = model_logp[static_cast<size_t>(e.id)];
    kl += std::exp(lp) * (lp - lq);
  }
  if (std::isfinite(base_rest_logmass)) {
    // The model's mass outside the base's top ids, summed directly over those ids.
    std::vector<char> in_top(model_logp.size(), 0);
    for (const TopEntry& e : base_top) in_top[static_cast<size_t>(e.id)] = 1;
    double rest = 0;
    for (size_t i = 0; i < model_logp.size(); ++i)
      if (!in_top[i]) rest += std::exp(model_logp[i]);
    const double lq_rest = rest > 0 ? std::log(rest) : -std::numeric_limits<double>::infinity();
    kl += std::exp(base_rest_logmass) * (base_rest_logmass - lq_rest);
  }
  return std::max(0.0, kl);
}

int32_t argmax(std::span<const double> values) {
  assert(!values.empty());
  return static_cast<int32_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

double quantile(std::span<const double> sorted, double q) {
  assert(!sorted.empty());
  const double at = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (at - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Summary summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.count = static_cast<int64_t>(values.size());
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(s.count);
  if (s.count > 1) {
    double var = 0;
    for (double v : values) var += (v - s.mean) * (v - s.mean);
    var /= static_cast<double>(s.count - 1);
    s.std_error = std::sqrt(var / static_cast<double>(s.count));
  }
  s.min = values.front();
  s.max = values.back();
  s.median = quantile(values, 0.5);
  s.p99 = quantile(values, 0.99);
  return s;
}

}  // namespace cadenza::eval
