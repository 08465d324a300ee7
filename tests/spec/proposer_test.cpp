#include "spec/proposer.h"

#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "spec/ngram_proposer.h"

namespace cadenza::spec {
namespace {

using Tokens = std::vector<int32_t>;

// A proposer with per-request state, the shape a draft model takes: it counts calls per id and
// fails for one id, to check the batched default and the release() hook.
class CountingProposer final : public Proposer {
 public:
  Status propose(RequestId id, std::span<const int32_t> history, int32_t max_draft_tokens,
                 Tokens& draft) override {
    draft.clear();
    if (id == kFailingId) return make_error("draft: request {} failed", id);
    const int32_t calls = ++calls_[id];
    for (int32_t i = 0; i < max_draft_tokens; ++i) draft.push_back(calls);
    return {};
  }
  void release(RequestId id) override { calls_.erase(id); }
  std::string_view name() const override { return "counting"; }

  static constexpr RequestId kFailingId = 13;
  std::map<RequestId, int32_t> calls_;
};

TEST(Proposer, BatchDefaultAnswersEachQueryInOrder) {
  auto ngram = NgramProposer::create({.ngram_min = 1, .ngram_max = 2});
  ASSERT_TRUE(ngram.ok());
  const Tokens a = {1, 2, 3, 1, 2}, b = {4, 5, 6}, c = {7, 8, 7};
  const DraftQuery queries[] = {{1, a, 2}, {2, b, 2}, {3, c, 0}, {4, c, 3}};
  std::vector<Tokens> drafts(4, Tokens{-1});
  ASSERT_TRUE((*ngram)->propose_batch(queries, drafts).ok());
  EXPECT_EQ(drafts[0], (Tokens{3, 1}));
  EXPECT_TRUE(drafts[1].empty());
  EXPECT_TRUE(drafts[2].empty());  // k = 0: skipped
  EXPECT_EQ(drafts[3], (Tokens{8, 7}));
}

TEST(Proposer, BatchErrorLeavesEveryDraftEmpty) {
  CountingProposer p;
  const Tokens h = {1, 2};
  const DraftQuery queries[] = {{1, h, 2}, {CountingProposer::kFailingId, h, 2}, {2, h, 2}};
  std::vector<Tokens> drafts(3);
  Status st = p.propose_batch(queries, drafts);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error(), "draft: request 13 failed");
  for (const Tokens& d : drafts) EXPECT_TRUE(d.empty());
}

TEST(Proposer, ReleaseDropsPerRequestState) {
  CountingProposer p;
  const Tokens h = {1};
  Tokens draft;
  ASSERT_TRUE(p.propose(5, h, 1, draft).ok());
  ASSERT_TRUE(p.propose(5, h, 1, draft).ok());
  EXPECT_EQ(draft, (Tokens{2}));
  p.release(5);
  p.release(6);  // unknown: ignored
  ASSERT_TRUE(p.propose(5, h, 1, draft).ok());
  EXPECT_EQ(draft, (Tokens{1}));  // as for a new request
}

}  // namespace
}  // namespace cadenza::spec
