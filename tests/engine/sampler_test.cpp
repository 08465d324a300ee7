#include "engine/sampler.h"

#include <cmath>
#include <map>
#include <random>

#include <gtest/gtest.h>

namespace cadenza {
namespace {

std::vector<float> random_logits(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Sampler, GreedyPicksArgmaxAndLowestIdOnTies) {
  Sampler s({.temperature = 0.0f});
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(logits), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  const auto logits = random_logits(1000, std::random_device{}());
  SamplingParams p{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 42};
  Sampler a(p), b(p);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(a.sample(logits), b.sample(logits));
}

TEST(Sampler, TopKOneIsGreedy) {
  const auto logits = random_logits(500, std::random_device{}());
  Sampler s({.temperature = 5.0f, .top_k = 1, .top_p = 1.0f, .min_p = 0.0f, .seed = 7});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(logits), argmax(logits));
}

TEST(Sampler, TopKRestrictsToTheKBest) {
  const auto logits = random_logits(300, std::random_device{}());
  std::vector<float> sorted = logits;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  Sampler s({.temperature = 2.0f, .top_k = 5, .top_p = 1.0f, .min_p = 0.0f, .seed = 3});
  for (int i = 0; i < 300; ++i) EXPECT_GE(logits[s.sample(logits)], sorted[4]);
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  // Three tokens with probabilities 0.5, 0.3, 0.2 at temperature 1.
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 11});
  std::map<int, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) counts[s.sample(logits)]++;
  EXPECT_NEAR(counts[0] / double(n), 0.5, 0.02);
  EXPECT_NEAR(counts[1] / double(n), 0.3, 0.02);
  EXPECT_NEAR(counts[2] / double(n), 0.2, 0.02);
}

TEST(Sampler, TopPDropsTheTail) {
  // p = 0.6, 0.3, 0.1: top_p 0.8 keeps the first two only.
  std::vector<float> logits = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 0.8f, .min_p = 0.0f, .seed = 5});
  for (int i = 0; i < 2000; ++i) EXPECT_NE(s.sample(logits), 2);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  // p = 0.7, 0.25, 0.05: min_p 0.1 keeps tokens with p >= 0.07.
  std::vector<float> logits = {std::log(0.7f), std::log(0.25f), std::log(0.05f)};
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.1f, .seed = 9});
  for (int i = 0; i < 2000; ++i) EXPECT_NE(s.sample(logits), 2);
}

}  // namespace
}  // namespace cadenza
