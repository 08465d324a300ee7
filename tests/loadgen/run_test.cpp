// End-to-end runs of the load generator against the scripted fake server: timings, throughput,
// keep-alive, open-loop arrivals and errors by kind.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "temp_dir.h"
#include "test_models.h"
#include <nlohmann/json.hpp>

#include "fake_server.h"
#include "gguf/gguf.h"
#include "loadgen/arrival.h"
#include "loadgen/metrics.h"
#include "loadgen/runner.h"
#include "synth/synth.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::loadgen {
namespace {

using testing::FakeScript;
using testing::FakeServer;

std::vector<WorkItem> items(size_t n, int32_t max_tokens = 10) {
  WorkloadOptions o;
  o.input.mean = 16;
  o.output.mean = max_tokens;
  auto w = make_workload(o, nullptr, n);
  EXPECT_TRUE(w);
  return w ? *w : std::vector<WorkItem>{};
}

RunResult run(const RunConfig& cfg, size_t n) {
  auto r = run_load(cfg, items(n), items(2), nullptr);
  EXPECT_TRUE(r) << (r ? "" : r.error());
  return r ? std::move(*r) : RunResult{};
}

// The fake server paces its chunks by timers on an absolute schedule: a loaded machine (CI has two
// cores, the ASan build is several times slower) makes events late, never early. So a measured
// time must reach the scripted one (less 5% for timer and clock granularity), and may exceed it by
// up to 2x: wide enough for any load seen, narrow enough to catch a wrong interval (TTFT of the
// role chunk is ~0, a gap spanning a skipped chunk doubles, a miscounted round changes E2E by a
// multiple of the script).
void expect_scripted_time(double measured, double scripted, const char* what) {
  EXPECT_GE(measured, scripted * 0.95) << what << ": faster than the fake server's script";
  EXPECT_LE(measured, scripted * 2.0) << what << ": more than twice the scripted time";
}
// A rate from scripted times: at most the script's (plus 5%), at least half of it.
void expect_scripted_rate(double measured, double scripted, const char* what) {
  EXPECT_LE(measured, scripted * 1.05) << what << ": faster than the fake server's script";
  EXPECT_GE(measured, scripted * 0.5) << what;
}

// Scripted: TTFT 200 ms, then 10 chunks 50 ms apart (so E2E 650 ms, TPOT 50 ms). 4 workers x 3
// rounds. Counts are exact; times are bounded as expect_scripted_time says.
TEST(Run, ClosedLoopTimingsMatchTheScript) {
  FakeServer server(FakeScript{.ttft_ms = 200, .itl_ms = 50, .chunks = 10});
  RunConfig cfg;
  cfg.url = server.url();
  cfg.request.model = "fake";
  cfg.concurrency = 4;
  cfg.num_requests = 12;
  cfg.warmup = 0;
  const RunResult r = run(cfg, 12);
  const Summary s = summarize_run(r, {});
  ASSERT_EQ(s.completed, 12u) << (r.records.empty() ? "" : r.records[0].message);
  EXPECT_EQ(s.failed, 0u);
  expect_scripted_time(s.ttft_ms.median, 200, "TTFT median");
  expect_scripted_time(s.itl_ms.median, 50, "ITL median");
  expect_scripted_time(s.tpot_ms.median, 50, "TPOT median");
  expect_scripted_time(s.e2e_ms.median, 650, "E2E median");
  EXPECT_LT(s.ttft_ms.median, s.e2e_ms.median);
  EXPECT_EQ(s.itl_ms.count, 12u * 9u);
  EXPECT_EQ(s.output_tokens, 120);  // from usage
  EXPECT_EQ(s.output_source, "usage");
  EXPECT_EQ(s.input_tokens, 12 * 7);  // usage.prompt_tokens of the fake
  // 3 rounds of 650 ms: 12 / 1.95 s requests/s and 10x that in output tokens/s.
  expect_scripted_rate(s.request_throughput, 12 / 1.95, "request throughput");
  expect_scripted_rate(s.output_token_throughput, 120 / 1.95, "output throughput");
  EXPECT_NEAR(s.output_token_throughput, 10 * s.request_throughput, 1e-6 * s.output_token_throughput);
  // Keep-alive: each worker keeps its connection.
  EXPECT_EQ(r.connections_opened, 4u);
  EXPECT_EQ(server.connections(), 4);
  EXPECT_GE(s.cpu_ms_per_request, 0.0);
  // The requests were streaming chat requests for the model.
  auto body = nlohmann::json::parse(server.bodies().at(0));
  EXPECT_EQ(body["model"], "fake");
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["max_tokens"], 10);
  EXPECT_EQ(server.targets().at(0), "/v1/chat/completions");
}

// Token chunks as OpenAI-compatible servers send them: a role announcement first (sent here at
// once, before the scripted TTFT), every third token with empty text (held-back UTF-8), a
// finish-only chunk at the end. The role and finish chunks are not tokens; the empty ones are.
TEST(Run, EmptyTokenChunksCountAndTheRoleChunkIsNotTheFirstToken) {
  FakeServer server(FakeScript{.ttft_ms = 200,
                               .itl_ms = 50,
                               .chunks = 9,
                               .role_chunk = true,
                               .empty_every = 3,
                               .finish_chunk = true});
  RunConfig cfg;
  cfg.url = server.url();
  cfg.request.model = "fake";
  cfg.concurrency = 2;
  cfg.num_requests = 4;
  const RunResult r = run(cfg, 4);
  const Summary s = summarize_run(r, {});
  ASSERT_EQ(s.completed, 4u) << (r.records.empty() ? "" : r.records[0].message);
  for (const auto& rec : r.records) EXPECT_EQ(rec.chunk_s.size(), 9u);
  EXPECT_EQ(s.output_chunks, 36);
  EXPECT_EQ(s.output_tokens, 36);
  EXPECT_EQ(s.itl_ms.count, 4u * 8u);
  expect_scripted_time(s.ttft_ms.median, 200, "TTFT median (not the role chunk)");
  expect_scripted_time(s.itl_ms.median, 50, "ITL median (empty chunks included)");
  // No gap spans a skipped chunk: 8 gaps per request (counted above), each chunk timed.
  for (const auto& rec : r.records) {
    for (size_t i = 1; i < rec.chunk_s.size(); ++i) EXPECT_GT(rec.chunk_s[i], rec.chunk_s[i - 1]);
  }
}

// A finish_reason on an empty chunk: the last token when the usage counts one more token than
// the token chunks (vLLM, Cadenza), only a close when it does not (llama.cpp, finish_chunk above).
TEST(Run, AnEmptyFinishChunkIsTheLastTokenWhenUsageSaysSo) {
  for (bool usage : {true, false}) {
    FakeServer server(FakeScript{.ttft_ms = 100,
                                 .itl_ms = 50,
                                 .chunks = 5,
                                 .send_usage = usage,
                                 .last_token_finishes = true});
    RunConfig cfg;
    cfg.url = server.url();
    cfg.request.model = "fake";
    cfg.concurrency = 2;
    cfg.num_requests = 2;
    const RunResult r = run(cfg, 2);
    const Summary s = summarize_run(r, {});
    ASSERT_EQ(s.completed, 2u) << (r.records.empty() ? "" : r.records[0].message);
    EXPECT_EQ(s.output_chunks, usage ? 10 : 8) << "usage " << usage;
    EXPECT_EQ(s.output_tokens, usage ? 10 : 8) << "usage " << usage;
    // The last token is timed by its (finish) chunk: 4 gaps of 50 ms after the first, where the
    // chunk before it would give 3. Over the 150/200 midpoint, and not late beyond 2x.
    if (usage)
      for (const auto& rec : r.records) {
        const double span_ms = (rec.chunk_s.back() - rec.chunk_s.front()) * 1e3;
        EXPECT_GT(span_ms, 175) << "last token";
        EXPECT_LE(span_ms, 400) << "last token";
      }
  }
}

// Output tokens: the server's usage when sent, even with a tokenizer; the re-encoded text only
// without usage.
TEST(Run, UsageIsCountedBeforeTheTokenizer) {
  // The tiny test model: the built-in byte-level vocabulary, small enough to write fast.
  const synth::SynthOptions opts = test::tiny_model_options(1);
  const test::TempDir dir("loadgen-run-vocab");
  const std::string model = dir.file("vocab.gguf");
  auto written = synth::write_synthetic_model(opts, model);
  ASSERT_TRUE(written) << written.error();
  auto file = gguf::GgufFile::open(model);
  ASSERT_TRUE(file) << file.error();
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok) << tok.error();
  // The fake's text for 6 chunks; the byte-level vocabulary encodes it as more than 6 tokens.
  std::string text;
  for (int i = 0; i < 6; ++i) text += " tok" + std::to_string(i);
  const auto text_tokens = static_cast<int64_t>((*tok)->encode(text, false, false).size());
  ASSERT_NE(text_tokens, 6);
  for (bool usage : {true, false}) {
    FakeServer server(FakeScript{.ttft_ms = 5, .itl_ms = 5, .chunks = 6, .send_usage = usage});
    RunConfig cfg;
    cfg.url = server.url();
    cfg.request.model = "fake";
    cfg.concurrency = 1;
    cfg.num_requests = 2;
    auto r = run_load(cfg, items(2), {}, tok->get());
    ASSERT_TRUE(r) << r.error();
    const Summary s = summarize_run(*r, {});
    ASSERT_EQ(s.completed, 2u);
    EXPECT_EQ(s.output_source, usage ? "usage" : "tokenizer");
    EXPECT_EQ(s.output_tokens, usage ? 12 : 2 * text_tokens);
    EXPECT_EQ(s.output_chunks, 12);
  }
}

TEST(Run, WarmupRequestsAreNotMeasured) {
  FakeServer server(FakeScript{.ttft_ms = 5, .itl_ms = 5, .chunks = 3});
  RunConfig cfg;
  cfg.url = server.url();
  cfg.request.model = "fake";
  cfg.concurrency = 2;
  cfg.num_requests = 6;
  cfg.warmup = 2;
  const RunResult r = run(cfg, 6);
  EXPECT_EQ(r.records.size(), 6u);
  EXPECT_EQ(server.requests(), 8);
  EXPECT_EQ(r.connections_opened, 2u);  // warm connections reused
}

TEST(Run, GoodputCountsRequestsMeetingSlos) {
  FakeServer server(FakeScript{.ttft_ms = 100, .itl_ms = 10, .chunks = 4});
  RunConfig cfg;
  cfg.url = server.url();
  cfg.request.model = "fake";
  cfg.concurrency = 2;
  cfg.num_requests = 4;
  const RunResult r = run(cfg, 4);
  EXPECT_EQ(summarize_run(r, {.ttft_ms = 1000, .tpot_ms = 1000}).good_requests, 4u);
  EXPECT_EQ(summarize_run(r, {.ttft_ms = 20}).good_requests, 0u);
  const Summary s = summarize_run(r, {.tpot_ms = 1000});
  EXPECT_TRUE(s.has_slo);
  EXPECT_NEAR(s.goodput, s.request_throughput, 1e-9);
}

// Open loop: requests leave on the seeded Poisson schedule, whatever the responses do.
TEST(Run, OpenLoopFollowsThePoissonSchedule) {
  FakeServer server(FakeScript{.ttft_ms = 300, .itl_ms = 10, .chunks = 2});
  RunConfig cfg;
  cfg.url = server.url();
  cfg.request.model = "fake";
  cfg.request_rate = 20;
  cfg.concurrency = 0;
  cfg.num_requests = 30;
  cfg.seed = 11;
  const RunResult r = run(cfg, 30);
  ASSERT_EQ(r.records.size(), 30u);
  ArrivalProcess a(20, 11);
  const auto expected = a.schedule(30);
  std::vector<double> starts;
  for (const auto& rec : r.records) starts.push_back(rec.start_s);
  std::sort(starts.begin(), starts.end());
  // start_s counts from the start of the run, where the schedule starts.
  std::vector<double> late;
  for (size_t i = 0; i < starts.size(); ++i) late.push_back(starts[i] - expected[i]);
  std::sort(late.begin(), late.end());
  // Never early (the schedule is absolute), and late by far less than the 300 ms a response takes:
  // a sender that waited for responses would be hundreds of ms late. 100 ms leaves room for a
  // loaded CI machine under sanitizers.
  EXPECT_GT(late.front(), -0.002);
  EXPECT_LT(late[late.size() / 2], 0.100);  // median lateness
  EXPECT_EQ(summarize_run(r, {}).completed, 30u);
  // Concurrent requests need several connections.
  EXPECT_GT(r.connections_opened, 1u);
}

TEST(Run, BurstWithAConcurrencyCap) {
  FakeServer server(FakeScript{.ttft_ms = 50, .itl_ms = 5, .chunks = 2});
  RunConfig cfg;
  cfg.url = server.url();
  cfg.request.model = "fake";
  cfg.request_rate = std::numeric_limits<double>::infinity();
  cfg.concurrency = 3;
  cfg.num_requests = 9;
  const RunResult r = run(cfg, 9);
  EXPECT_EQ(summarize_run(r, {}).completed, 9u);
  EXPECT_EQ(r.connections_opened, 3u);
}

TEST(Run, DurationStopsSending) {
  FakeServer server(FakeScript{.ttft_ms = 20, .itl_ms = 5, .chunks = 2});
  RunConfig cfg;
  cfg.url = server.url();
  cfg.request.model = "fake";
  cfg.concurrency = 2;
  cfg.num_requests = 0;
  cfg.duration_s = 0.5;
  const RunResult r = run(cfg, 5);
  EXPECT_GT(r.records.size(), 5u);  // items were cycled
  EXPECT_LT(r.duration_s, 1.0);
}

// Count of `kind` in s.errors, with the whole map in the failure message.
size_t errors(const Summary& s, const std::string& kind) {
  auto it = s.errors.find(kind);
  std::string all;
  for (const auto& [k, n] : s.errors) all += k + "=" + std::to_string(n) + " ";
  EXPECT_NE(it, s.errors.end()) << "no " << kind << " errors; got: " << all;
  return it == s.errors.end() ? 0 : it->second;
}

Summary run_errors(FakeScript script, size_t n, double timeout_s = 30) {
  FakeServer server(script);
  RunConfig cfg;
  cfg.url = server.url();
  cfg.request.model = "fake";
  cfg.concurrency = 2;
  cfg.num_requests = n;
  cfg.timeout_s = timeout_s;
  return summarize_run(run(cfg, n), {});
}

TEST(Errors, CountedByKind) {
  {
    const Summary s = run_errors({.mode = FakeScript::Mode::http_500}, 4);
    EXPECT_EQ(s.completed, 0u);
    EXPECT_EQ(errors(s, "http_status"), 4u);
  }
  {
    const Summary s =
        run_errors({.mode = FakeScript::Mode::close_mid_stream, .ttft_ms = 5, .itl_ms = 5}, 4);
    EXPECT_EQ(errors(s, "closed"), 4u);
  }
  {
    const Summary s = run_errors(
        {.mode = FakeScript::Mode::malformed, .ttft_ms = 5, .itl_ms = 5, .chunks = 3}, 3);
    EXPECT_EQ(errors(s, "malformed"), 3u);
  }
  {
    const Summary s =
        run_errors({.mode = FakeScript::Mode::no_done, .ttft_ms = 5, .itl_ms = 5, .chunks = 3}, 2);
    EXPECT_EQ(errors(s, "malformed"), 2u);
  }
  {
    const Summary s = run_errors({.ttft_ms = 3000}, 2, /*timeout_s=*/0.3);
    EXPECT_EQ(errors(s, "timeout"), 2u);
  }
  {
    RunConfig cfg;
    cfg.url = "http://127.0.0.1:" + std::to_string(testing::unused_port());
    cfg.request.model = "fake";
    cfg.concurrency = 1;
    cfg.num_requests = 3;
    const Summary s = summarize_run(run(cfg, 3), {});
    EXPECT_EQ(errors(s, "connect"), 3u);
    EXPECT_EQ(s.completed, 0u);
  }
}

TEST(Run, ConfigurationErrorsAreValues) {
  RunConfig cfg;
  cfg.url = "https://127.0.0.1:1";
  cfg.num_requests = 1;
  EXPECT_FALSE(run_load(cfg, items(1), {}, nullptr));
  cfg.url = "http://127.0.0.1:1";
  EXPECT_FALSE(run_load(cfg, {}, {}, nullptr));
  cfg.num_requests = 0;
  EXPECT_FALSE(run_load(cfg, items(1), {}, nullptr));
}

}  // namespace
}  // namespace cadenza::loadgen
