// Admission by predicted time to first token (`serve --ttft-slo-factor`,
// server/ttft_admission.h): the predictor on a synthetic clock, then the server's answer.
#include "server/ttft_admission.h"

#include <chrono>
#include <future>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "running_server.h"
#include "test_client.h"

namespace cadenza::server {
namespace {

using Clock = TtftAdmission::Clock;
using nlohmann::json;

Clock::time_point at_ms(double ms) {
  return Clock::time_point{} + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double, std::milli>(ms));
}

// An idle prompt step of 100 ms + 1 ms per token; decode-only steps of `decodes` sequences
// taking `step_ms`, the last one started at `start_ms` and still running (unless finished).
struct Fixture {
  TtftAdmission adm{2.0, 2048};
  double now_ms = 0;
  Fixture() { adm.calibrate_idle(0.100, 0.001); }
  void decode_steps(int n, int64_t decodes, double step_ms) {
    for (int i = 0; i < n; ++i) {
      adm.step_started(at_ms(now_ms));
      now_ms += step_ms;
      adm.step_finished(at_ms(now_ms), 0, decodes);
    }
  }
  void start_step() { adm.step_started(at_ms(now_ms)); }
};

TEST(TtftAdmission, OffOrUncalibratedAdmitsEverything) {
  TtftAdmission off(0, 2048);
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.decide(100000, 100000, 8, at_ms(0)).admit);
  TtftAdmission uncalibrated(2, 2048);
  EXPECT_FALSE(uncalibrated.calibrated());
  EXPECT_TRUE(uncalibrated.decide(100000, 100000, 8, at_ms(0)).admit);
}

TEST(TtftAdmission, AnIdleServerAdmitsAtTheIdlePrediction) {
  Fixture f;
  const auto d = f.adm.decide(50, 0, 0, at_ms(0));
  EXPECT_TRUE(d.admit);
  EXPECT_FALSE(d.busy);
  EXPECT_NEAR(d.idle_s, 0.150, 1e-9);
  EXPECT_NEAR(d.predicted_s, d.idle_s, 1e-12);
}

TEST(TtftAdmission, RefusesEarlyInALongStepAndAdmitsNearItsEnd) {
  Fixture f;
  f.decode_steps(10, 4, 150);
  f.start_step();
  // 1 ms into a 150 ms step: 149 + 150 (a step of 4 decodes) + 50 (its prompt) > 2 x 150.
  const auto early = f.adm.decide(50, 0, 4, at_ms(f.now_ms + 1));
  EXPECT_FALSE(early.admit);
  EXPECT_NEAR(early.predicted_s, 0.349, 1e-6);
  EXPECT_NEAR(early.retry_after_s, 0.149, 1e-6);  // when this step ends
  // 140 ms in: 10 + 200 <= 300.
  const auto late = f.adm.decide(50, 0, 4, at_ms(f.now_ms + 140));
  EXPECT_TRUE(late.admit);
  EXPECT_NEAR(late.predicted_s, 0.210, 1e-6);
}

TEST(TtftAdmission, AFullBatchTooSlowForTheObjectiveIsRefusedEvenBetweenSteps) {
  Fixture f;
  f.decode_steps(10, 8, 350);
  // No step running: 350 + 50 > 300; with fewer decoding the steps are faster (the fit's line).
  EXPECT_FALSE(f.adm.decide(50, 0, 8, at_ms(f.now_ms)).admit);
  f.decode_steps(10, 2, 110);
  EXPECT_TRUE(f.adm.decide(50, 0, 2, at_ms(f.now_ms)).admit);
  const auto m = f.adm.model();
  EXPECT_GT(m.dec_c, 0.0);  // steps of 8 cost more than steps of 2
}

TEST(TtftAdmission, APromptIsNotAdmittedIfItMakesAWaitingOneLate) {
  Fixture f;
  f.decode_steps(10, 1, 100);
  // A: 50 tokens between steps: predicted 100 + 50 = 150 ms, limit 300 (150 ms of slack).
  const auto a = f.adm.decide(50, 0, 1, at_ms(f.now_ms));
  ASSERT_TRUE(a.admit);
  // B: 200 tokens would add 200 ms to A's step; on its own (Q = 50) it would pass: 100 + 250
  // <= 2 x 300.
  const auto b = f.adm.decide(200, 50, 1, at_ms(f.now_ms));
  EXPECT_FALSE(b.admit);
  // Once A has its first token, B passes.
  f.adm.started(a.id);
  EXPECT_TRUE(f.adm.decide(200, 0, 1, at_ms(f.now_ms)).admit);
}

TEST(TtftAdmission, MeasuredFirstTokensCorrectThePrediction) {
  Fixture f;
  f.decode_steps(10, 4, 100);
  const auto d = f.adm.decide(50, 0, 4, at_ms(f.now_ms));
  ASSERT_TRUE(d.admit);  // 100 + 50 <= 300
  EXPECT_NEAR(d.predicted_s, 0.150, 1e-6);
  f.adm.started(d.id);
  // Every first token takes 2.5x the prediction: the correction learns it, and the same
  // request no longer fits its limit (2.5 x 150 > 300).
  for (int i = 0; i < 40; ++i) f.adm.observe_first_token(d, 2.5 * d.predicted_s);
  EXPECT_NEAR(f.adm.model().k_load, 2.5, 0.05);
  EXPECT_FALSE(f.adm.decide(50, 0, 4, at_ms(f.now_ms)).admit);
}

TEST(TtftAdmission, ClearWaitingForgetsEveryHeldPrompt) {
  Fixture f;
  f.decode_steps(10, 1, 100);
  ASSERT_TRUE(f.adm.decide(50, 0, 1, at_ms(f.now_ms)).admit);
  EXPECT_FALSE(f.adm.decide(200, 50, 1, at_ms(f.now_ms)).admit);
  f.adm.clear_waiting();
  EXPECT_TRUE(f.adm.decide(200, 0, 1, at_ms(f.now_ms)).admit);
}

TEST(PrefixEstimate, CountsWholeBlocksSeenBeforeAndForgetsTheOldest) {
  PrefixEstimate est(16, 8);
  std::vector<int32_t> a(40);
  for (int32_t i = 0; i < 40; ++i) a[static_cast<size_t>(i)] = i;
  EXPECT_EQ(est.cached_tokens(a), 0);
  est.add(a);
  EXPECT_EQ(est.cached_tokens(a), 32);  // two whole blocks; the last 8 tokens are not one
  std::vector<int32_t> b = a;
  b[20] = 999;  // differs in the second block: only the first is shared
  EXPECT_EQ(est.cached_tokens(b), 16);
  b[0] = 999;  // and now in the first: nothing (the chain hashes every earlier token)
  EXPECT_EQ(est.cached_tokens(b), 0);
  const std::vector<int32_t> exact(a.begin(), a.begin() + 32);
  EXPECT_EQ(est.cached_tokens(exact), 31);  // at least one token is always computed
  // 8 blocks at most: ten other prompts of two blocks push a's out.
  for (int32_t k = 1; k <= 10; ++k) {
    std::vector<int32_t> other(32, 1000 * k);
    est.add(other);
  }
  EXPECT_EQ(est.cached_tokens(a), 0);
}

// The server: long prompts sent together while a generation runs. Those that would wait behind
// another's prompt (its tokens queued ahead of theirs) exceed 1x their idle time: 429
// ttft_limit with Retry-After and retry-after-ms, counted in /metrics. Every request gets 200 or
// that 429; nothing is left running; an idle server admits a long prompt.
TEST(TtftAdmissionServer, RefusesWhatWouldWaitWith429AndRetryAfterMs) {
  testing::Options o;
  o.model_path = testing::slow_model_path();
  o.max_model_len = testing::kSlowModelLen;
  o.ttft_slo_factor = 1;
  auto s = testing::start(o);
  ASSERT_NE(s, nullptr);
  const uint16_t port = s->port;
  // A generation that keeps the engine busy while the burst comes.
  auto running = std::async(std::launch::async, [port] {
    return testing::post(port, "/v1/completions",
                         {{"prompt", "Tell a story"}, {"max_tokens", 200}, {"ignore_eos", true}});
  });
  ASSERT_TRUE(testing::wait_metric(port, "cadenza_num_requests_running", 1));
  std::string words;
  for (int i = 0; i < 150; ++i) words += " word" + std::to_string(i);
  std::vector<std::future<testing::Response>> burst;
  for (int i = 0; i < 6; ++i) {
    burst.push_back(std::async(std::launch::async, [port, i, &words] {
      return testing::post(port, "/v1/completions",
                           {{"prompt", "request " + std::to_string(i) + words},
                            {"max_tokens", 2}});
    }));
  }
  int ok = 0, refused = 0;
  for (auto& f : burst) {
    const testing::Response r = f.get();
    if (r.status == 200) {
      ++ok;
      continue;
    }
    ASSERT_EQ(r.status, 429) << r.body;
    ++refused;
    EXPECT_EQ(r.json()["error"]["code"], "ttft_limit") << r.body;
    EXPECT_EQ(r.json()["error"]["type"], "rate_limit_error") << r.body;
    const std::string retry_ms = r.header("retry-after-ms");
    ASSERT_FALSE(retry_ms.empty()) << r.body;
    EXPECT_GE(std::stol(retry_ms), 1);
    EXPECT_GE(std::stol(r.header("retry-after")), 1);
  }
  EXPECT_GE(refused, 1);
  EXPECT_EQ(ok + refused, 6);
  EXPECT_EQ(running.get().status, 200);
  // Idle again: admitted whatever its length.
  EXPECT_TRUE(testing::wait_metric(port, "cadenza_num_requests_running", 0));
  EXPECT_EQ(testing::post(port, "/v1/completions",
                          {{"prompt", "alone" + words}, {"max_tokens", 2}})
                .status,
            200);
  EXPECT_EQ(testing::metric_value(testing::get(port, "/metrics").body,
                                  "cadenza_ttft_admission_refusals_total"),
            refused);
  EXPECT_TRUE(testing::wait_metric(port, "cadenza_num_requests_running", 0));
  EXPECT_TRUE(testing::wait_metric(port, "cadenza_kv_cache_usage_ratio", 0));
}

TEST(TtftAdmissionServer, BadFactorsAreErrors) {
  for (double bad : {0.5, -1.0, std::numeric_limits<double>::infinity()}) {
    testing::Options o;
    o.ttft_slo_factor = bad;
    auto built = testing::build(o);
    ASSERT_FALSE(built) << bad;
    EXPECT_NE(built.error().find("--ttft-slo-factor"), std::string::npos) << built.error();
  }
}

}  // namespace
}  // namespace cadenza::server
