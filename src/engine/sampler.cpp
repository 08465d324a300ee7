#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/simd/sampling.h"

namespace cadenza {

namespace {
// A masked logit (grammar, min_tokens suppression): probability exactly 0.
constexpr float kMasked = -std::numeric_limits<float>::infinity();

// The all-tokens path's weights, exp((logit - max) / T) per token (0 for masked ones): filter()
// computes them once and probability() / draw() read them instead of exponentiating again (the
// draw alone recomputed about half the vocabulary's). One buffer per thread, not per request
// (150k floats each); filter() and its readers run back to back inside one sample()/verify().
thread_local std::vector<float> tl_weights;
}  // namespace

int32_t argmax(std::span<const float> values) {
  if (values.empty()) return -1;
  // The greedy path of every request: a vector loop (simd/sampling.h), exact at every ISA level.
  return static_cast<int32_t>(
      simd::argmax(values.data(), static_cast<int64_t>(values.size())));
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0); }

int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.temperature <= 0.0f || logits.size() <= 1) return argmax(logits);
  const Filtered f = filter(logits);
  return draw(f, logits, -1);
}

Sampler::Verdict Sampler::verify(std::span<const float> logits, int32_t draft) {
  if (params_.temperature <= 0.0f || logits.size() <= 1) {
    const int32_t token = argmax(logits);
    return {token, token == draft};
  }
  const Filtered f = filter(logits);
  const double p = probability(f, logits, draft);
  if (uniform() < p) return {draft, true};
  const int32_t token = draw(f, logits, draft);
  // Nothing but the draft has weight (p rounded just below 1): the draft is the only outcome.
  if (token < 0) return {draft, true};
  return {token, false};
}

double Sampler::probability(const Filtered& f, std::span<const float> logits, int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= logits.size()) return 0.0;
  if (f.all_tokens) return tl_weights[static_cast<size_t>(id)] / f.z;
  for (const auto& c : candidates_)
    if (c.id == id) return c.p / f.mass;
  return 0.0;
}

int32_t Sampler::draw(const Filtered& f, std::span<const float> logits, int32_t excluded) {
  if (f.all_tokens) {
    // Every token stays: draw in id order, no sort at all.
    const std::vector<float>& w = tl_weights;
    double total = f.z;
    if (excluded >= 0) total -= w[static_cast<size_t>(excluded)];
    if (!(total > 0.0)) return -1;
    const double u = uniform() * total;
    double acc = 0.0;
    int32_t last = -1;
    // Masked tokens (a grammar, min_tokens) weigh exactly 0 and `excluded` is read as 0, so
    // neither moves `acc` and neither can be returned (u < acc held before them too). No branch
    // on the mask: inside a JSON string the masked tokens are scattered, and a test per token
    // mispredicted often enough to double the draw's time. `last` (the fallback when rounding
    // leaves u >= the sum) is the last token of positive weight.
    for (size_t i = 0; i < logits.size(); ++i) {
      const float wi = static_cast<int32_t>(i) == excluded ? 0.0f : w[i];
      acc += wi;
      last = wi > 0.0f ? static_cast<int32_t>(i) : last;
      if (u < acc) return static_cast<int32_t>(i);
    }
    return last;
  }
  double total = f.mass;
  for (const auto& c : candidates_)
    if (c.id == excluded) total -= c.p;
  if (!(total > 0.0)) return -1;
  const double u = uniform() * total;
  double acc = 0.0;
  int32_t last = -1;
  for (const auto& c : candidates_) {
    if (c.id == excluded) continue;
    acc += c.p;
    last = c.id;
    if (u < acc) return last;
  }
  return last;
}

Sampler::Filtered Sampler::filter(std::span<const float> logits) {
  Filtered f;
  f.inv_t = 1.0f / params_.temperature;
  const float inv_t = f.inv_t;
  const bool top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < logits.size();
  const bool top_p = params_.top_p < 1.0f;
  const bool min_p = params_.min_p > 0.0f;
  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };

  candidates_.clear();
  double z = 0.0;  // softmax denominator over the candidates the filters start from
  if (top_k) {
    // top-k: keep the k best, sorted. One pass with a heap of the k best so far (its front the
    // worst of them): most tokens cost one comparison, and no vocabulary-sized candidate list is
    // built. by_logit is a strict total order, so the k kept are those a full sort would keep.
    const auto keep = static_cast<size_t>(params_.top_k);
    candidates_.reserve(keep);
    for (size_t i = 0; i < logits.size(); ++i) {
      const Candidate c{static_cast<int32_t>(i), logits[i], 0.0f};
      if (candidates_.size() < keep) {
        candidates_.push_back(c);
        if (candidates_.size() == keep)
          std::make_heap(candidates_.begin(), candidates_.end(), by_logit);
      } else if (by_logit(c, candidates_.front())) {
        std::pop_heap(candidates_.begin(), candidates_.end(), by_logit);
        candidates_.back() = c;
        std::push_heap(candidates_.begin(), candidates_.end(), by_logit);
      }
    }
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
    const float max_logit = candidates_[0].logit;
    for (auto& c : candidates_) {
      c.p = std::exp((c.logit - max_logit) * inv_t);
      z += c.p;
    }
  } else {
    // No top-k: the softmax runs over the whole vocabulary, but top-p and min-p keep a prefix of
    // the tokens sorted by logit, so only a pool that surely contains that prefix is sorted (the
    // OpenAI defaults, temperature 1 without top-k, would otherwise sort 150k logits per token).
    const auto n = static_cast<int64_t>(logits.size());
    const float max_logit = simd::max_value(logits.data(), n);
    // The weights exp((logit - max) / T) of every token (0 for masked ones) and their sum, in
    // one vector pass (simd/sampling.h); kept for the draw or the pool below.
    tl_weights.resize(logits.size());
    z = simd::softmax_weights(logits.data(), n, max_logit, inv_t, tl_weights.data());
    if (!top_p && !min_p) {
      // Every token stays: the draw reads the same weights.
      f.all_tokens = true;
      f.max_logit = max_logit;
      f.z = z;
      return f;
    }
    // The pool: tokens whose weight relative to the top token is >= floor. It is a prefix of the
    // sorted order. min-p's own floor bounds the result; top-p needs a pool holding >= top_p of
    // the mass (the nucleus is then inside it), so the floor drops until it does.
    float floor = min_p ? params_.min_p * 0.999f : 1e-4f;  // below min-p: rounding margin
    for (;;) {
      candidates_.clear();
      double pool = 0.0;
      for (size_t i = 0; i < logits.size(); ++i) {
        if (logits[i] == kMasked) continue;  // weight 0: never in the pool
        const float w = tl_weights[i];
        if (w >= floor) {
          candidates_.push_back({static_cast<int32_t>(i), logits[i], w});
          pool += w;
        }
      }
      if (min_p || pool >= static_cast<double>(params_.top_p) * z || floor == 0.0f) break;
      floor = floor > 1e-30f ? floor * 1e-4f : 0.0f;
    }
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  for (auto& c : candidates_) c.p = static_cast<float>(c.p / z);

  // top-p: the smallest prefix whose mass reaches top_p (at least one token).
  if (top_p) {
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
  if (min_p) {
    const float floor = params_.min_p * candidates_[0].p;
    size_t n = 1;
    while (n < candidates_.size() && candidates_[n].p >= floor) ++n;
    candidates_.resize(n);
  }

  for (const auto& c : candidates_) f.mass += c.p;
  return f;
}

}  // namespace cadenza
