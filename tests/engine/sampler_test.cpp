#include "engine/sampler.h"

#include <cmath>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "chi_square.h"

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

// Without top-k the sampler sorts only a pool of likely tokens. A large vocabulary whose head
// holds a third of the mass and whose flat tail holds the rest makes top-p reach past the first
// pool (the tail tokens are below its floor), so the pool must grow to the whole tail.
TEST(Sampler, TopPWithoutTopKReachesIntoAFlatTail) {
  const size_t vocab = 20001;
  std::vector<float> logits(vocab, 0.0f);
  logits[0] = 9.3f;  // weight 1 against e^-9.3 = 9.1e-5 (below the first pool) for the others
  const double tail_w = std::exp(-9.3), z = 1.0 + 20000.0 * tail_w;
  // Nucleus for top_p 0.9: token 0, then tail tokens by id until the mass reaches 0.9.
  const double head_p = 1.0 / z;
  const auto last_tail = static_cast<size_t>(std::ceil((0.9 - head_p) / (tail_w / z)));
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .min_p = 0.0f, .seed = 21});
  int head = 0;
  size_t max_id = 0;
  const int n = 3000;
  for (int i = 0; i < n; ++i) {
    const auto id = static_cast<size_t>(s.sample(logits));
    head += id == 0;
    max_id = std::max(max_id, id);
  }
  EXPECT_NEAR(head / double(n), head_p / 0.9, 0.04);
  EXPECT_LE(max_id, last_tail + 1);     // nothing past the nucleus
  EXPECT_GT(max_id, last_tail * 9 / 10);  // and the nucleus reaches deep into the tail
}

// The OpenAI defaults (temperature 1, no top-k / top-p / min-p) over a real-sized vocabulary:
// frequencies follow the softmax.
TEST(Sampler, FullVocabularyFrequenciesFollowTheSoftmax) {
  std::vector<float> logits(151936, -30.0f);
  logits[1000] = std::log(0.5f);
  logits[77] = std::log(0.3f);
  logits[150000] = std::log(0.2f);
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 13});
  std::map<int, int> counts;
  const int n = 2000;
  for (int i = 0; i < n; ++i) counts[s.sample(logits)]++;
  EXPECT_NEAR(counts[1000] / double(n), 0.5, 0.04);
  EXPECT_NEAR(counts[77] / double(n), 0.3, 0.04);
  EXPECT_NEAR(counts[150000] / double(n), 0.2, 0.04);
}

TEST(Sampler, MinPWithoutTopKKeepsExactlyTheTokensAboveTheFloor) {
  // Relative weights 1, 0.5, 0.2, 0.05 (and a long tail far below): min_p 0.1 keeps three.
  std::vector<float> logits(20000, -40.0f);
  const float w[] = {1.0f, 0.5f, 0.2f, 0.05f};
  for (int i = 0; i < 4; ++i) logits[static_cast<size_t>(100 * i + 5)] = std::log(w[i]);
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.1f, .seed = 17});
  std::map<int, int> counts;
  for (int i = 0; i < 6000; ++i) counts[s.sample(logits)]++;
  EXPECT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts.count(305), 0u);
  EXPECT_NEAR(counts[5] / 6000.0, 1.0 / 1.7, 0.03);
}

// Speculative verification (Sampler::verify): the emitted token must be distributed exactly as
// sample()'s, whatever the draft (likely, unlikely, filtered out), for every filter combination.
struct VerifyCase {
  const char* name;
  SamplingParams params;
};

std::map<int32_t, int64_t> histogram_of_samples(const std::vector<float>& logits,
                                                const SamplingParams& p, int n) {
  Sampler s(p);
  std::map<int32_t, int64_t> h;
  for (int i = 0; i < n; ++i) ++h[s.sample(logits)];
  return h;
}

TEST(SamplerVerify, EmittedTokensAreDistributedAsPlainSampling) {
  // A small vocabulary with a few likely tokens and a tail, so every category is well filled.
  std::vector<float> logits = {2.0f, 1.5f, 1.4f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f, -6.0f, -9.0f};
  const VerifyCase cases[] = {
      {"temperature only", {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f}},
      {"hot", {.temperature = 1.7f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f}},
      {"top-k", {.temperature = 0.8f, .top_k = 4, .top_p = 1.0f, .min_p = 0.0f}},
      {"top-p", {.temperature = 1.0f, .top_k = 0, .top_p = 0.8f, .min_p = 0.0f}},
      {"defaults", {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f}},
  };
  constexpr int kDraws = 60000;
  for (const VerifyCase& c : cases) {
    SamplingParams p = c.params;
    p.seed = 1234;
    const auto plain = histogram_of_samples(logits, p, kDraws);
    // The most likely token, a middling one, and one every filter but temperature drops.
    for (int32_t draft : {0, 3, 8}) {
      SamplingParams q = p;
      q.seed = 99 + static_cast<uint64_t>(draft);
      Sampler s(q);
      std::map<int32_t, int64_t> verified;
      int64_t accepted = 0;
      for (int i = 0; i < kDraws; ++i) {
        const Sampler::Verdict v = s.verify(logits, draft);
        EXPECT_EQ(v.accepted, v.token == draft);
        accepted += v.accepted;
        ++verified[v.token];
      }
      const test_util::ChiSquare x = test_util::chi_square_two_sample(plain, verified);
      EXPECT_TRUE(x.same()) << c.name << ", draft " << draft << ": chi2 " << x.statistic
                            << " > " << x.critical << " (df " << x.df << ")";
      // Acceptance is p(draft): the draft's share of plain sampling.
      const double p_draft = plain.count(draft) ? static_cast<double>(plain.at(draft)) / kDraws : 0.0;
      EXPECT_NEAR(static_cast<double>(accepted) / kDraws, p_draft, 0.015) << c.name << ", draft " << draft;
    }
  }
}

TEST(SamplerVerify, TheTestDetectsABiasedAcceptanceRule) {
  // The control for the test above: accepting the draft twice as often as p(draft) (a wrong
  // rule) must fail the same chi-square check, so the check has the power to catch a bug.
  std::vector<float> logits = {2.0f, 1.5f, 1.4f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f, -6.0f, -9.0f};
  SamplingParams p{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 5};
  const auto plain = histogram_of_samples(logits, p, 60000);
  Sampler s(p);
  std::map<int32_t, int64_t> biased;
  std::mt19937_64 coin(3);
  for (int i = 0; i < 60000; ++i) {
    const Sampler::Verdict v = s.verify(logits, 3);
    // Wrong: a rejected draft gets a second chance.
    if (!v.accepted && (coin() & 1)) ++biased[3];
    else ++biased[v.token];
  }
  EXPECT_FALSE(test_util::chi_square_two_sample(plain, biased).same());
}

TEST(SamplerVerify, GreedyComparesWithTheArgmax) {
  Sampler s({.temperature = 0.0f});
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.verify(logits, 1).token, 1);
  EXPECT_TRUE(s.verify(logits, 1).accepted);
  const Sampler::Verdict v = s.verify(logits, 3);  // tie, but the lowest id is the argmax
  EXPECT_EQ(v.token, 1);
  EXPECT_FALSE(v.accepted);
}

TEST(SamplerVerify, ADraftThatIsTheOnlyCandidateIsAlwaysAccepted) {
  Sampler s({.temperature = 1.0f, .top_k = 1, .top_p = 1.0f, .min_p = 0.0f, .seed = 1});
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f};
  for (int i = 0; i < 100; ++i) {
    const Sampler::Verdict v = s.verify(logits, 1);
    EXPECT_TRUE(v.accepted);
    EXPECT_EQ(v.token, 1);
  }
  // A draft outside the candidates is never accepted: the token is the only candidate.
  for (int i = 0; i < 100; ++i) {
    const Sampler::Verdict v = s.verify(logits, 2);
    EXPECT_FALSE(v.accepted);
    EXPECT_EQ(v.token, 1);
  }
}

}  // namespace
}  // namespace cadenza
