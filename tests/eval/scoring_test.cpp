// eval/scoring.h: log-softmax in double, top-k and the rest mass, the top-k KL divergence
// against the full sum, argmax and summaries.
#include "eval/scoring.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace cadenza::eval {
namespace {

std::vector<float> random_logits(int n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

double full_kl(const std::vector<double>& p, const std::vector<double>& q) {
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) kl += std::exp(p[i]) * (p[i] - q[i]);
  return kl;
}

TEST(Scoring, LogSoftmaxNormalizesAndKeepsDifferences) {
  const std::vector<float> logits = {1000.0f, 999.0f, -5.0f, 0.0f};  // no overflow at 1000
  std::vector<double> lp;
  log_softmax(logits, lp);
  ASSERT_EQ(lp.size(), 4u);
  double sum = 0;
  for (double x : lp) sum += std::exp(x);
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_NEAR(lp[0] - lp[1], 1.0, 1e-12);
  EXPECT_NEAR(lp[0], -std::log1p(std::exp(-1.0)), 1e-12);
}

TEST(Scoring, TopKIsSortedAndTheRestMassCompletesIt) {
  std::vector<double> lp;
  log_softmax(random_logits(500, 1), lp);
  const TopK t = top_k(lp, 10);
  ASSERT_EQ(t.top.size(), 10u);
  double top_mass = 0;
  for (size_t i = 0; i < t.top.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(t.top[i - 1].logprob, t.top[i].logprob);
    }
    EXPECT_FLOAT_EQ(t.top[i].logprob, static_cast<float>(lp[static_cast<size_t>(t.top[i].id)]));
    top_mass += std::exp(lp[static_cast<size_t>(t.top[i].id)]);
  }
  EXPECT_EQ(t.top[0].id, argmax(lp));
  EXPECT_NEAR(top_mass + std::exp(t.rest_logmass), 1.0, 1e-12);
  // k at the vocabulary size: every id, still most probable first, nothing left over.
  const TopK all = top_k(lp, 500);
  ASSERT_EQ(all.top.size(), 500u);
  EXPECT_EQ(all.top[0].id, argmax(lp));
  EXPECT_GE(all.top[0].logprob, all.top[1].logprob);
  EXPECT_TRUE(std::isinf(all.rest_logmass));
  EXPECT_TRUE(std::isinf(top_k(lp, 9999).rest_logmass));
}

TEST(Scoring, ATinyRestMassIsSummedNotCancelled) {
  // One id holds all but ~1e-12 of the mass: 1 - top mass would be pure rounding.
  std::vector<float> logits(100, 0.0f);
  logits[7] = 32.0f;
  std::vector<double> lp;
  log_softmax(logits, lp);
  const TopK t = top_k(lp, 1);
  ASSERT_EQ(t.top[0].id, 7);
  // The other 99 ids: 99 * exp(-32) / (1 + 99 * exp(-32)).
  const double want = std::log(99.0) - 32.0 - std::log1p(99.0 * std::exp(-32.0));
  EXPECT_NEAR(t.rest_logmass, want, 1e-9);
  // Ties go to the lower id.
  const std::vector<double> flat(10, std::log(0.1));
  const TopK f = top_k(flat, 3);
  EXPECT_EQ(f.top[0].id, 0);
  EXPECT_EQ(f.top[1].id, 1);
  EXPECT_EQ(f.top[2].id, 2);
  EXPECT_NEAR(std::exp(f.rest_logmass), 0.7, 1e-12);
}

TEST(Scoring, KlOfADistributionAgainstItselfIsZero) {
  std::vector<double> lp;
  log_softmax(random_logits(1000, 2), lp);
  const TopK t = top_k(lp, 16);
  const KlEstimate k = kl_divergence(t.top, t.rest_logmass, sample_tail(lp, t.top, 32, 5), lp);
  EXPECT_NEAR(k.lower_bound, 0.0, 1e-6);
  EXPECT_NEAR(k.estimate, 0.0, 1e-6);
}

TEST(Scoring, FullTopKGivesTheExactKlAndTruncationALowerBound) {
  std::vector<double> p, q;
  log_softmax(random_logits(2000, 3), p);
  std::vector<float> noisy = random_logits(2000, 3);
  const std::vector<float> noise = random_logits(2000, 4, 0.5f);
  for (size_t i = 0; i < noisy.size(); ++i) noisy[i] += noise[i];
  log_softmax(noisy, q);
  const double exact = full_kl(p, q);
  ASSERT_GT(exact, 0.01);
  const TopK all = top_k(p, 2000);
  // The stored log-probs are floats: exact to float rounding.
  const KlEstimate full = kl_divergence(all.top, all.rest_logmass, {}, q);
  EXPECT_NEAR(full.lower_bound, exact, 1e-5 * (1 + exact));
  EXPECT_EQ(full.estimate, full.lower_bound);
  EXPECT_TRUE(sample_tail(p, all.top, 8, 1).empty());  // no tail to sample
  double previous = 0;
  for (int k : {1, 8, 64, 512}) {
    const TopK t = top_k(p, k);
    const double kl = kl_divergence(t.top, t.rest_logmass, {}, q).lower_bound;
    EXPECT_GE(kl, 0.0) << k;
    EXPECT_LE(kl, exact + 1e-6) << k;          // merging outcomes only loses divergence
    EXPECT_GE(kl, previous - 1e-6) << k;       // and more kept ids lose less
    previous = kl;
  }
}

TEST(Scoring, TailSamplesGiveAnUnbiasedEstimate) {
  std::vector<double> p, q;
  log_softmax(random_logits(2000, 5), p);
  std::vector<float> noisy = random_logits(2000, 5);
  const std::vector<float> noise = random_logits(2000, 6, 0.5f);
  for (size_t i = 0; i < noisy.size(); ++i) noisy[i] += noise[i];
  log_softmax(noisy, q);
  const double exact = full_kl(p, q);
  const TopK t = top_k(p, 8);
  const double bound = kl_divergence(t.top, t.rest_logmass, {}, q).lower_bound;
  ASSERT_LT(bound, 0.8 * exact);  // the merged tail misses much of it here
  // Over many seeds the estimate averages to the exact value (systematic sampling: unbiased).
  double sum = 0;
  const int seeds = 400;
  for (int s = 0; s < seeds; ++s) {
    const std::vector<TopEntry> tail = sample_tail(p, t.top, 16, static_cast<uint64_t>(s));
    ASSERT_EQ(tail.size(), 16u);
    for (const TopEntry& e : tail) {
      for (const TopEntry& top : t.top) ASSERT_NE(e.id, top.id);
    }
    sum += kl_divergence(t.top, t.rest_logmass, tail, q).estimate;
  }
  EXPECT_NEAR(sum / seeds, exact, 0.02 * exact);
  // The same seed draws the same ids.
  const auto a = sample_tail(p, t.top, 16, 3), b = sample_tail(p, t.top, 16, 3);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].id, b[i].id);
}

TEST(Scoring, SummaryMeanErrorAndQuantiles) {
  std::vector<double> v;
  for (int i = 0; i <= 100; ++i) v.push_back(100 - i);  // 0..100, shuffled order
  const Summary s = summarize(v);
  EXPECT_EQ(s.count, 101);
  EXPECT_DOUBLE_EQ(s.mean, 50.0);
  EXPECT_DOUBLE_EQ(s.median, 50.0);
  EXPECT_DOUBLE_EQ(s.p99, 99.0);
  EXPECT_DOUBLE_EQ(s.min, 0.0);
  EXPECT_DOUBLE_EQ(s.max, 100.0);
  // Sample variance of 0..100 is 101 * 102 / 12 = 858.5.
  EXPECT_NEAR(s.std_error, std::sqrt(858.5 / 101.0), 1e-12);
  EXPECT_EQ(summarize({}).count, 0);
  EXPECT_DOUBLE_EQ(summarize({3.0}).std_error, 0.0);
}

}  // namespace
}  // namespace cadenza::eval
