#include "eval/scoring.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>
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
  TopK r;
  std::vector<int32_t> ids;
  ids.reserve(n);
  if (n == logp.size()) {
    for (size_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(i));
  } else {
    // The n-th largest value (a min-heap of the n largest so far: one compare for most ids),
    // then the ids above it and, lowest ids first, those equal to it.
    std::vector<double> heap(logp.begin(), logp.begin() + static_cast<std::ptrdiff_t>(n));
    std::make_heap(heap.begin(), heap.end(), std::greater<double>());
    for (size_t i = n; i < logp.size(); ++i) {
      if (logp[i] > heap.front()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<double>());
        heap.back() = logp[i];
        std::push_heap(heap.begin(), heap.end(), std::greater<double>());
      }
    }
    const double threshold = heap.front();
    for (size_t i = 0; i < logp.size(); ++i)
      if (logp[i] > threshold) ids.push_back(static_cast<int32_t>(i));
    for (size_t i = 0; i < logp.size() && ids.size() < n; ++i)
      if (logp[i] == threshold) ids.push_back(static_cast<int32_t>(i));
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    const double x = logp[static_cast<size_t>(a)], y = logp[static_cast<size_t>(b)];
    return x > y || (x == y && a < b);
  });
  r.top.reserve(n);
  if (n == logp.size()) {
    for (int32_t id : ids) r.top.push_back({.id = id, .logprob = static_cast<float>(logp[static_cast<size_t>(id)])});
    r.rest_logmass = -std::numeric_limits<double>::infinity();
  } else {
    double top_mass = 0;
    std::vector<char> in_top(logp.size(), 0);
    for (int32_t id : ids) {
      r.top.push_back({.id = id, .logprob = static_cast<float>(logp[static_cast<size_t>(id)])});
      top_mass += std::exp(logp[static_cast<size_t>(id)]);
      in_top[static_cast<size_t>(id)] = 1;
    }
    // 1 - top mass is exact enough while the rest is not tiny (relative error ~1e-13 at 1e-3);
    // below that, the sum over the other ids.
    double rest = 1.0 - top_mass;
    if (rest < 1e-3) {
      rest = 0;
      for (size_t i = 0; i < logp.size(); ++i)
        if (!in_top[i]) rest += std::exp(logp[i]);
    }
    r.rest_logmass = rest > 0 ? std::log(rest) : -std::numeric_limits<double>::infinity();
  }
  return r;
}

std::vector<TopEntry> sample_tail(std::span<const double> logp, std::span<const TopEntry> top,
                                  int32_t m, uint64_t seed) {
  std::vector<TopEntry> out;
  if (m <= 0 || top.size() >= logp.size()) return out;
  std::vector<char> in_top(logp.size(), 0);
  for (const TopEntry& e : top) in_top[static_cast<size_t>(e.id)] = 1;
  std::vector<double> prob(logp.size(), 0.0);  // exp(logp) outside the top, 0 inside
  double total = 0;
  for (size_t i = 0; i < logp.size(); ++i) {
    if (!in_top[i]) total += prob[i] = std::exp(logp[i]);
  }
  if (!(total > 0)) return out;
  // splitmix64: the offset in [0, 1).
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  const double offset = static_cast<double>(z >> 11) * 0x1.0p-53;
  out.reserve(static_cast<size_t>(m));
  double cumulative = 0;
  int32_t drawn = 0;
  size_t last = 0;
  for (size_t i = 0; i < logp.size() && drawn < m; ++i) {
    if (in_top[i]) continue;
    last = i;
    cumulative += prob[i] / total;
    while (drawn < m && (static_cast<double>(drawn) + offset) / m < cumulative) {
      out.push_back({.id = static_cast<int32_t>(i), .logprob = static_cast<float>(logp[i])});
      ++drawn;
    }
  }
  // Rounding may leave the last draws past the final cumulative sum: the last tail id.
  while (drawn < m) {
    out.push_back({.id = static_cast<int32_t>(last), .logprob = static_cast<float>(logp[last])});
    ++drawn;
  }
  return out;
}

KlEstimate kl_divergence(std::span<const TopEntry> base_top, double base_rest_logmass,
                         std::span<const TopEntry> tail_samples,
                         std::span<const double> model_logp) {
  double head = 0;
  for (const TopEntry& e : base_top) {
    assert(e.id >= 0 && static_cast<size_t>(e.id) < model_logp.size());
    const double lp = e.logprob, lq = model_logp[static_cast<size_t>(e.id)];
    head += std::exp(lp) * (lp - lq);
  }
  KlEstimate r;
  if (!std::isfinite(base_rest_logmass)) {
    r.lower_bound = r.estimate = std::max(0.0, head);
    return r;
  }
  // The model's mass outside the base's top ids, summed directly over those ids.
  std::vector<char> in_top(model_logp.size(), 0);
  for (const TopEntry& e : base_top) in_top[static_cast<size_t>(e.id)] = 1;
  double rest = 0;
  for (size_t i = 0; i < model_logp.size(); ++i)
    if (!in_top[i]) rest += std::exp(model_logp[i]);
  const double lq_rest = rest > 0 ? std::log(rest) : -std::numeric_limits<double>::infinity();
  const double p_rest = std::exp(base_rest_logmass);
  r.lower_bound = std::max(0.0, head + p_rest * (base_rest_logmass - lq_rest));
  if (tail_samples.empty()) {
    r.estimate = r.lower_bound;
    return r;
  }
  double mean = 0;
  for (const TopEntry& e : tail_samples) {
    assert(e.id >= 0 && static_cast<size_t>(e.id) < model_logp.size());
    mean += static_cast<double>(e.logprob) - model_logp[static_cast<size_t>(e.id)];
  }
  mean /= static_cast<double>(tail_samples.size());
  r.estimate = head + p_rest * mean;
  return r;
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
