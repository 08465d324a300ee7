// apply_token_bitmask against a plain per-token reference, on random rows: masks empty, full and
// mixed per word, shorter than the row, rows whose length is not a multiple of 32, and logits
// that are -inf, +inf or NaN where the mask allows them (the return value's cases).
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/grammar_mask.h"

namespace cadenza::engine {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The definition: a token is kept iff its bit is set; the row is sampleable iff a kept logit is
// finite or +inf.
bool reference(std::span<const uint32_t> mask, std::vector<float>& logits) {
  bool any = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const size_t w = i / 32;
    const bool allowed = w < mask.size() && ((mask[w] >> (i % 32)) & 1u);
    if (!allowed) logits[i] = -kInf;
    else if (std::isfinite(logits[i]) || logits[i] == kInf) any = true;
  }
  return any;
}

void expect_same_row(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) EXPECT_TRUE(std::isnan(b[i])) << i;
    else EXPECT_EQ(a[i], b[i]) << i;
  }
}

TEST(GrammarMask, MatchesTheReferenceOnRandomRows) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = 1 + rng() % 300;
    std::vector<float> row(n);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (float& x : row) {
      const uint32_t r = rng() % 64;
      x = r == 0 ? -kInf : r == 1 ? kInf : r == 2 ? std::numeric_limits<float>::quiet_NaN() : normal(rng);
    }
    // Mask words: empty, full, or mixed (sparse or dense bits); sometimes shorter than the row.
    size_t words = (n + 31) / 32;
    if (rng() % 5 == 0) words = rng() % (words + 1);
    std::vector<uint32_t> mask(words);
    for (uint32_t& w : mask) {
      const uint32_t kind = rng() % 4;
      w = kind == 0 ? 0u : kind == 1 ? ~0u : kind == 2 ? (1u << (rng() % 32)) : static_cast<uint32_t>(rng());
    }
    // Some rows have only non-sampleable logits where the mask allows: the result is false.
    if (trial % 7 == 0)
      for (float& x : row)
        if (std::isfinite(x) || x == kInf) x = -kInf;
    std::vector<float> expected = row, got = row;
    const bool want = reference(mask, expected);
    EXPECT_EQ(apply_token_bitmask(mask, got), want) << "trial " << trial;
    expect_same_row(expected, got);
  }
}

TEST(GrammarMask, OneAllowedTokenAtTheEndOfAPartialWord) {
  std::vector<float> row(70, 1.0f);
  std::vector<uint32_t> mask = {0u, 0u, 1u << 5};  // token 69 only
  EXPECT_TRUE(apply_token_bitmask(mask, row));
  for (size_t i = 0; i < row.size(); ++i) EXPECT_EQ(row[i], i == 69 ? 1.0f : -kInf) << i;
  row[69] = -kInf;
  EXPECT_FALSE(apply_token_bitmask(mask, row));
}

}  // namespace
}  // namespace cadenza::engine
