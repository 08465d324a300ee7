#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace cadenza {

int32_t argmax(std::span<const float> values) {
  if (values.empty()) return -1;
  size_t best = 0;
  for (size_t i = 1; i < values.size(); ++i)
    if (values[i] > values[best]) best = i;
  return static_cast<int32_t>(best);
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.temperature <= 0.0f || logits.size() <= 1) return argmax(logits);

  candidates_.clear();
  candidates_.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    candidates_.push_back({static_cast<int32_t>(i), logits[i], 0.0f});
  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };

  // top-k: keep the k best, sorted (partial sort keeps this cheap on large vocabularies).
  size_t keep = candidates_.size();
  if (params_.top_k > 0) keep = std::min(keep, static_cast<size_t>(params_.top_k));
  std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(keep),
                    candidates_.end(), by_logit);
  candidates_.resize(keep);

  // Softmax at the temperature (subtract the max for stability).
  const float inv_t = 1.0f / params_.temperature;
  const float max_logit = candidates_[0].logit;
  double sum = 0.0;
  for (auto& c : candidates_) {
    c.p = std::exp((c.logit - max_logit) * inv_t);
    sum += c.p;
  }
  for (auto& c : candidates_) c.p = static_cast<float>(c.p / sum);

  // top-p: the smallest prefix whose mass reaches top_p (at least one token).
  if (params_.top_p < 1.0f) {
    double cum = 0.0;
    size_t n = 0;
    while (n < candidates_.size()) {
      cum += candidates_[n].p;
      ++n;
      if (cum >= params_.top_p) break;
    }
    candidates_.resize(n);
  }
  // min-p: drop tokens far less likely than the best one.
  if (params_.min_p > 0.0f) {
    const float floor = params_.min_p * candidates_[0].p;
    size_t n = 1;
    while (n < candidates_.size() && candidates_[n].p >= floor) ++n;
    candidates_.resize(n);
  }

  double mass = 0.0;
  for (const auto& c : candidates_) mass += c.p;
  // A uniform double in [0, mass) from 53 random bits: reproducible across standard libraries.
  const double u = static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0) * mass;
  double acc = 0.0;
  for (const auto& c : candidates_) {
    acc += c.p;
    if (u < acc) return c.id;
  }
  return candidates_.back().id;
}

}  // namespace cadenza
