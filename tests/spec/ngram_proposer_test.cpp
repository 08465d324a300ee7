#include "spec/ngram_proposer.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace cadenza::spec {
namespace {

using Tokens = std::vector<int32_t>;

std::unique_ptr<NgramProposer> make(const NgramOptions& o) {
  auto r = NgramProposer::create(o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error());
  return r.ok() ? std::move(r).value() : nullptr;
}

Tokens propose(NgramProposer& p, const Tokens& history, int32_t k) {
  Tokens draft = {-1, -1};  // stale content: propose() must clear it
  Status st = p.propose(7, history, k, draft);
  EXPECT_TRUE(st.ok());
  return draft;
}

TEST(NgramProposer, ProposesWhatFollowedTheLastOccurrenceOfTheSuffix) {
  auto p = make({.ngram_min = 1, .ngram_max = 3, .num_speculative_tokens = 4});
  // Suffix "2 3 4" occurred at the start; 5 6 7 8 followed it.
  EXPECT_EQ(propose(*p, {1, 2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4}, 4), (Tokens{5, 6, 7, 8}));
  // Fewer tokens follow the occurrence than k: only those that exist.
  EXPECT_EQ(propose(*p, {2, 3, 4, 5, 9, 2, 3, 4}, 4), (Tokens{5, 9, 2, 3}));
  EXPECT_EQ(propose(*p, {2, 3, 4, 5, 2, 3, 4}, 4), (Tokens{5, 2, 3, 4}));
}

TEST(NgramProposer, NoMatchProposesNothing) {
  auto p = make({.ngram_min = 2, .ngram_max = 3});
  EXPECT_TRUE(propose(*p, {1, 2, 3, 4, 5, 6}, 4).empty());
  EXPECT_TRUE(propose(*p, {}, 4).empty());
  EXPECT_TRUE(propose(*p, {1}, 4).empty());
  EXPECT_TRUE(propose(*p, {1, 1}, 4).empty());   // a 2-gram needs 3 tokens to recur in
  // The last token recurs, but ngram_min = 2 asks for two.
  EXPECT_TRUE(propose(*p, {9, 5, 6, 7, 5}, 4).empty());
  EXPECT_EQ(propose(*p, {9, 7, 5, 6, 7, 5}, 4), (Tokens{6, 7, 5}));
}

TEST(NgramProposer, LongerMatchWinsOverMoreRecentShorterOne) {
  auto p = make({.ngram_min = 1, .ngram_max = 3, .num_speculative_tokens = 2});
  // "1 2 3" (length 3) occurs early, followed by 10 11; "2 3" (length 2) occurs later, followed
  // by 20 21; "3" alone, most recently, followed by 30 31. The 3-gram wins.
  const Tokens h = {1, 2, 3, 10, 11, 0, 2, 3, 20, 21, 0, 3, 30, 31, 0, 1, 2, 3};
  EXPECT_EQ(propose(*p, h, 2), (Tokens{10, 11}));
  // With ngram_max = 2 the most recent 2-gram wins; with 1, the most recent 1-gram.
  auto p2 = make({.ngram_min = 1, .ngram_max = 2, .num_speculative_tokens = 2});
  EXPECT_EQ(propose(*p2, h, 2), (Tokens{20, 21}));
  auto p1 = make({.ngram_min = 1, .ngram_max = 1, .num_speculative_tokens = 2});
  EXPECT_EQ(propose(*p1, h, 2), (Tokens{30, 31}));
  // ngram_min above every match length: nothing.
  const Tokens short_only = {2, 3, 20, 0, 3, 30, 0, 1, 2, 3};
  auto p3 = make({.ngram_min = 3, .ngram_max = 4});
  EXPECT_TRUE(propose(*p3, short_only, 2).empty());
}

TEST(NgramProposer, AmongEqualMatchesTheMostRecentWins) {
  auto p = make({.ngram_min = 2, .ngram_max = 2, .num_speculative_tokens = 3});
  EXPECT_EQ(propose(*p, {4, 5, 1, 1, 1, 4, 5, 2, 2, 2, 9, 4, 5}, 3), (Tokens{2, 2, 2}));
}

TEST(NgramProposer, RepeatingPatternProposesItsOwnContinuation) {
  auto p = make({.ngram_min = 1, .ngram_max = 4, .num_speculative_tokens = 5});
  // The most recent full 4-gram match ends 3 tokens back (period 3), so 3 tokens follow it.
  EXPECT_EQ(propose(*p, {7, 8, 9, 7, 8, 9, 7, 8, 9}, 5), (Tokens{7, 8, 9}));
  // One token repeated: the match shifted by one has a single follower.
  EXPECT_EQ(propose(*p, {3, 3, 3, 3, 3, 3}, 5), (Tokens{3}));
}

TEST(NgramProposer, DraftLengthIsCappedByTheCallAndTheOptions) {
  const Tokens h = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1, 2};
  auto p = make({.ngram_min = 1, .ngram_max = 2, .num_speculative_tokens = 3});
  EXPECT_EQ(propose(*p, h, 1), (Tokens{3}));
  EXPECT_EQ(propose(*p, h, 3), (Tokens{3, 4, 5}));
  EXPECT_EQ(propose(*p, h, 10), (Tokens{3, 4, 5}));  // num_speculative_tokens = 3 caps it
  EXPECT_TRUE(propose(*p, h, 0).empty());
  EXPECT_TRUE(propose(*p, h, -2).empty());
  auto big = make({.ngram_min = 1, .ngram_max = 2, .num_speculative_tokens = kMaxSpeculativeTokens});
  EXPECT_EQ(propose(*big, h, kMaxSpeculativeTokens), (Tokens{3, 4, 5, 6, 7, 8, 9, 10, 11, 1, 2}));
}

TEST(NgramProposer, SearchesOnlyTheWindow) {
  // An occurrence 3,000 tokens back is found with a window that holds it, not with one that
  // does not: the work per call does not grow with the history.
  Tokens h = {100, 101, 102, 103, 104, 105};
  for (int32_t i = 0; i < 3000; ++i) h.push_back(1000 + i);  // no repeats
  h.push_back(100);
  h.push_back(101);
  auto wide = make({.ngram_min = 2, .ngram_max = 2, .search_window = 4096});
  EXPECT_EQ(propose(*wide, h, 3), (Tokens{102, 103, 104}));
  auto narrow = make({.ngram_min = 2, .ngram_max = 2, .search_window = 1000});
  EXPECT_TRUE(propose(*narrow, h, 3).empty());
  // Exactly at the edge: the window holds the last search_window tokens, the occurrence included.
  const auto size = static_cast<int32_t>(h.size());
  auto edge = make({.ngram_min = 2, .ngram_max = 2, .search_window = size});
  EXPECT_EQ(propose(*edge, h, 3), (Tokens{102, 103, 104}));
  auto past = make({.ngram_min = 2, .ngram_max = 2, .search_window = size - 1});
  EXPECT_TRUE(propose(*past, h, 3).empty());
}

TEST(NgramProposer, LongHistoryIsCheap) {
  // A million-token history with no repeats still only scans the window (no timing assertion:
  // the bound is structural; this checks a huge history is accepted and answered).
  Tokens h(1 << 20);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<int32_t>(i);
  auto p = make({});
  EXPECT_TRUE(propose(*p, h, 4).empty());
  h.push_back(static_cast<int32_t>(h.size() - 10));
  EXPECT_EQ(propose(*p, h, 4), (Tokens{static_cast<int32_t>(h.size() - 10), static_cast<int32_t>(h.size() - 9),
                                       static_cast<int32_t>(h.size() - 8), static_cast<int32_t>(h.size() - 7)}));
}

TEST(NgramProposer, BadOptionsAreClearErrors) {
  struct Case {
    NgramOptions options;
    std::string message;
  } cases[] = {
      {{.ngram_min = 0, .ngram_max = 3}, "ngram_min 0 must be in [1, ngram_max = 3]"},
      {{.ngram_min = 4, .ngram_max = 3}, "ngram_min 4 must be in [1, ngram_max = 3]"},
      {{.ngram_min = 1, .ngram_max = 0}, "ngram_max 0 must be in [1, 32]"},
      {{.ngram_min = 1, .ngram_max = kMaxNgram + 1}, "ngram_max 33 must be in [1, 32]"},
      {{.num_speculative_tokens = 0}, "num_speculative_tokens 0 must be in [1, 32]"},
      {{.num_speculative_tokens = kMaxSpeculativeTokens + 1}, "num_speculative_tokens 33 must be in [1, 32]"},
      {{.ngram_max = 4, .search_window = 4}, "search_window 4 must be in [ngram_max + 1 = 5, 262144]"},
      {{.search_window = kMaxSearchWindow + 1}, "search_window 262145 must be in"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    Status st = validate_ngram_options(c.options);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().find(c.message), std::string::npos) << st.error();
    auto r = NgramProposer::create(c.options);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error(), st.error());
  }
  // The edges of every range are accepted.
  EXPECT_TRUE(validate_ngram_options({.ngram_min = 1, .ngram_max = 1, .num_speculative_tokens = 1,
                                      .search_window = 2}).ok());
  EXPECT_TRUE(validate_ngram_options({.ngram_min = kMaxNgram, .ngram_max = kMaxNgram,
                                      .num_speculative_tokens = kMaxSpeculativeTokens,
                                      .search_window = kMaxSearchWindow}).ok());
  EXPECT_TRUE(validate_ngram_options({}).ok());
}

TEST(NgramProposer, IsAProposerWithoutPerRequestState) {
  auto p = make({.ngram_min = 1, .ngram_max = 2});
  Proposer& base = *p;
  EXPECT_EQ(base.name(), "ngram");
  const Tokens h = {1, 2, 3, 1, 2};
  Tokens draft;
  ASSERT_TRUE(base.propose(1, h, 2, draft).ok());
  EXPECT_EQ(draft, (Tokens{3, 1}));
  base.release(1);   // nothing kept: harmless, and so is an unknown id
  base.release(99);
  ASSERT_TRUE(base.propose(1, h, 2, draft).ok());
  EXPECT_EQ(draft, (Tokens{3, 1}));
}

}  // namespace
}  // namespace cadenza::spec
