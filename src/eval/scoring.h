// Scoring one predicted position from its logits: log-softmax in double, the top-k of a
// distribution with the log of the mass left outside it, and the KL divergence of a model's
// distribution from a base's top-k summary. Plus Summary, the mean / standard error / quantiles
// of a list of per-position values. Used by `cadenza perplexity` (docs/perplexity.md).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace cadenza::eval {

// out[i] = logits[i] - log(sum_j exp(logits[j])), in double. Requires !logits.empty();
// `out` is resized to logits.size().
void log_softmax(std::span<const float> logits, std::vector<double>& out);

// One entry of a base distribution's summary.
struct TopEntry {
  int32_t id = 0;
  float logprob = 0;
};

// The k most probable ids of the log-probabilities `logp` (a normalized log-softmax; ties:
// lower id first), most probable first, and log(sum of exp(logp) over the other ids): as
// 1 - top mass while that is >= 1e-3, else summed over those ids (1 - top mass would cancel);
// -infinity when k >= logp.size() or nothing is left. Requires k >= 1.
struct TopK {
  std::vector<TopEntry> top;
  double rest_logmass = 0;
};
TopK top_k(std::span<const double> logp, int32_t k);

// `m` ids drawn from the ids outside `top` with probability proportional to exp(logp), by
// systematic sampling (one uniform offset from `seed`, then steps of 1/m through the tail's
// cumulative mass: every id is drawn about m * its share of the tail times, the same ids for the
// same seed), with their log-probabilities. Empty when m == 0 or nothing lies outside `top`.
std::vector<TopEntry> sample_tail(std::span<const double> logp, std::span<const TopEntry> top,
                                  int32_t m, uint64_t seed);

// KL(base || model) where the base is known through its top-k summary (ids and log-probs, the
// log of the mass outside them) and optionally tail samples (sample_tail).
//   lower_bound: the k ids as they are, every other id merged into one "rest" outcome (base mass
//     exp(base_rest_logmass), model mass the model's total over the same ids). Exact when the
//     summary covers the vocabulary; else a lower bound of the full divergence (merging
//     outcomes never increases it). Never negative (clamped at 0 against rounding).
//   estimate: the top ids exactly plus the tail's part sum_tail p (log p - log q) estimated as
//     P_tail * mean over the samples of (log p - log q): an unbiased estimate of the full
//     divergence (one position's value may fall below the bound, even below 0; the mean over
//     many positions converges). Equal to lower_bound without samples.
// `model_logp` is the model's full log-softmax; requires every id < model_logp.size().
struct KlEstimate {
  double lower_bound = 0;
  double estimate = 0;
};
KlEstimate kl_divergence(std::span<const TopEntry> base_top, double base_rest_logmass,
                         std::span<const TopEntry> tail_samples,
                         std::span<const double> model_logp);

// The id of the largest value (ties: the lowest id). Requires !values.empty().
int32_t argmax(std::span<const double> values);

// Statistics of a sample of values.
struct Summary {
  int64_t count = 0;
  double mean = 0;
  double std_error = 0;  // of the mean: sample standard deviation / sqrt(count); 0 for count < 2
  double median = 0, p99 = 0, min = 0, max = 0;  // quantiles by linear interpolation
};
// Sorts `values` (taken by value). An empty sample gives a Summary of zeros.
Summary summarize(std::vector<double> values);

// The quantile q in [0, 1] of sorted values, interpolating linearly between order statistics.
// Requires !sorted.empty().
double quantile(std::span<const double> sorted, double q);

}  // namespace cadenza::eval
