// Adaptive speculation's pieces (engine/draft_length_policy.h): the step-cost fit, the acceptance
// estimate and the planner's decisions at the two extremes and in between.
#include "engine/draft_length_policy.h"

#include <vector>

#include <gtest/gtest.h>

namespace cadenza::engine {
namespace {

TEST(StepCostModel, FitsALineAndNeedsSpreadToBeReady) {
  StepCostModel m;
  for (int i = 0; i < 20; ++i) m.add(1.0, 0.010);
  EXPECT_FALSE(m.ready()) << "one size of step says nothing about the slope";
  for (int i = 0; i < 40; ++i) {
    const double positions = 1 + i % 5;
    m.add(positions, 0.010 + 0.002 * positions);
  }
  ASSERT_TRUE(m.ready());
  // The old constant points (0.010 at 1 position) lie 0.002 below the line: the fit is close,
  // not exact, and the recent points dominate.
  EXPECT_NEAR(m.per_token_s(), 0.002, 0.0005);
  EXPECT_NEAR(m.fixed_s(), 0.010, 0.002);
}

TEST(StepCostModel, KeepsItsFitWhileStepsAreAllOneSize) {
  StepCostModel m;
  for (int i = 0; i < 40; ++i) m.add(1 + i % 4, 0.010 + 0.002 * (1 + i % 4));
  ASSERT_TRUE(m.ready());
  // Speculation off: thousands of one-position steps (slower, say, under load). While the old
  // points still weigh, the line moves towards the new ones (through about 15 ms at 1 position);
  // once the sizes no longer vary the fit stays as it was, instead of refitting noise.
  for (int i = 0; i < 3000; ++i) m.add(1, 0.015);
  EXPECT_TRUE(m.ready());
  const double fixed = m.fixed_s(), per = m.per_token_s();
  EXPECT_NEAR(fixed + per, 0.015, 0.001);
  EXPECT_GE(per, 0.0);
  for (int i = 0; i < 2000; ++i) m.add(1, 0.015 + 0.001 * (i % 2));
  EXPECT_DOUBLE_EQ(m.fixed_s(), fixed);
  EXPECT_DOUBLE_EQ(m.per_token_s(), per);
}

TEST(StepCostModel, ForgetsOldSteps) {
  StepCostModel m(16);
  for (int i = 0; i < 200; ++i) m.add(1 + i % 4, 0.001 * (1 + i % 4));  // compute-bound
  EXPECT_NEAR(m.fixed_s(), 0.0, 1e-4);
  for (int i = 0; i < 200; ++i) m.add(1 + i % 4, 0.020 + 0.0001 * (1 + i % 4));  // bandwidth-bound
  EXPECT_NEAR(m.fixed_s(), 0.020, 1e-3);
  EXPECT_NEAR(m.per_token_s(), 0.0001, 1e-4);
}

TEST(StepCostModel, NoiseNeverGivesNegativeCosts) {
  StepCostModel m;
  for (int i = 0; i < 50; ++i) m.add(1 + i % 3, 0.010 - 0.003 * (i % 3));  // slower when smaller
  EXPECT_GE(m.per_token_s(), 0.0);
  EXPECT_GE(m.fixed_s(), 0.0);
}

TEST(AcceptanceEstimate, CountsTriesUpToTheFirstRejection) {
  AcceptanceEstimate a(0.5);
  EXPECT_DOUBLE_EQ(a.rate(), 0.5);
  for (int i = 0; i < 50; ++i) a.add(4, 4);  // always all accepted
  EXPECT_GT(a.rate(), 0.99);
  for (int i = 0; i < 50; ++i) a.add(2, 1);  // one accepted, the second rejected: rate 1/2
  EXPECT_NEAR(a.rate(), 0.5, 0.01);
  for (int i = 0; i < 50; ++i) a.add(1, 0);
  EXPECT_LT(a.rate(), 0.01);
}

// A stop (EOS, a stop string) right after accepted drafts ends the walk: the drafts after it were
// never judged and must not lower the estimate.
TEST(AcceptanceEstimate, AStopOnAnAcceptedDraftIsNoRejection) {
  AcceptanceEstimate a(0.5);
  for (int i = 0; i < 50; ++i) a.add(2, 2);  // drafted 4, a stop on the second accepted one
  EXPECT_GT(a.rate(), 0.99);
}

std::vector<int32_t> plan(const std::vector<double>& rates, const std::vector<int32_t>& max_k,
                          double fixed_s, double per_token_s, double draft_s = 0.0) {
  std::vector<int32_t> k(rates.size());
  plan_draft_lengths(rates, max_k, fixed_s, per_token_s, draft_s, static_cast<double>(rates.size()),
                     static_cast<double>(rates.size()), k);
  return k;
}

TEST(PlanDraftLengths, BandwidthBoundDraftsTheMost) {
  // A step costs 20 ms plus 0.1 ms a position: drafts with a fair chance all pay.
  EXPECT_EQ(plan({0.7}, {4}, 0.020, 0.0001), (std::vector<int32_t>{4}));
  EXPECT_EQ(plan({0.7, 0.8}, {4, 8}, 0.020, 0.0001), (std::vector<int32_t>{4, 8}));
  // ... but not very unlikely ones: at rate 0.3 the 5th draft adds 0.3^5 = 0.0024 tokens to a
  // 20.5 ms step expected to emit 1.42, for 0.1 ms (it would need 0.0069); the 4th (0.0081) pays.
  EXPECT_EQ(plan({0.3}, {8}, 0.020, 0.0001), (std::vector<int32_t>{4}));
}

TEST(PlanDraftLengths, ComputeBoundDraftsNothing) {
  // No fixed cost: k + 1 positions cost k + 1 times one, and fewer than k + 1 tokens come out.
  EXPECT_EQ(plan({0.9, 0.99}, {4, 4}, 0.0, 0.001), (std::vector<int32_t>{0, 0}));
}

TEST(PlanDraftLengths, InBetweenLikelyDraftsGetMore) {
  // A step of 8 positions at 1 ms fixed + 1 ms each: a position pays when its gain exceeds
  // per_token * E / (fixed + per_token * T) = 8 / 9 at first, so only near-certain drafts run.
  std::vector<double> rates(8, 0.1);
  rates[0] = 0.98;
  rates[1] = 0.5;
  std::vector<int32_t> k(8);
  plan_draft_lengths(rates, std::vector<int32_t>(8, 4), 0.001, 0.001, 0.0, 8, 8, k);
  EXPECT_GT(k[0], 0);
  EXPECT_EQ(k[1], 0);
  for (size_t i = 2; i < k.size(); ++i) EXPECT_EQ(k[i], 0);
  // One sequence with the same costs: E / (fixed + T) = 1/2, so the 0.98 draft goes as deep
  // as 0.98^j stays above the rising bar, and the 0.5 one only one position.
  EXPECT_EQ(plan({0.5}, {4}, 0.001, 0.001), (std::vector<int32_t>{0}));
  const std::vector<int32_t> deep = plan({0.98}, {8}, 0.001, 0.001);
  EXPECT_GE(deep[0], 3);
}

TEST(PlanDraftLengths, TheProposersCostCountsAgainstEachDraft) {
  // Verification nearly free (bandwidth-bound), but a draft model that costs half a target step
  // per draft token: at rate 0.7 the first draft adds 0.7 tokens for 10 ms on a 20 ms step that
  // emits 1 (needs > 0.5), the second 0.49 for 10 ms on 30 ms emitting 1.7 (needs > 0.57): one.
  EXPECT_EQ(plan({0.7}, {4}, 0.020, 0.0, 0.010), (std::vector<int32_t>{1}));
  // A cheap draft model (2% of a step) goes deep.
  EXPECT_EQ(plan({0.7}, {4}, 0.020, 0.0, 0.0004), (std::vector<int32_t>{4}));
  // ... and an expensive one (as costly as the target) never pays.
  EXPECT_EQ(plan({0.9}, {4}, 0.020, 0.0, 0.020), (std::vector<int32_t>{0}));
}

TEST(PlanDraftLengths, RespectsEachRequestsLimitAndZeroRates) {
  EXPECT_EQ(plan({1.0, 0.0, 0.9}, {2, 4, 0}, 0.020, 0.0), (std::vector<int32_t>{2, 0, 0}));
}

}  // namespace
}  // namespace cadenza::engine
