// SSE parsing, chunk decoding, request bodies, URLs, arrivals, sweeps.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "loadgen/arrival.h"
#include "loadgen/http_client.h"
#include "loadgen/openai_api.h"
#include "loadgen/report.h"
#include "loadgen/sse_parser.h"
#include "loadgen/sweep.h"

namespace cadenza::loadgen {
namespace {

std::vector<SseEvent> parse_all(std::string_view text, size_t piece) {
  SseParser p;
  std::vector<SseEvent> out;
  for (size_t i = 0; i < text.size(); i += piece)
    EXPECT_TRUE(p.feed(text.substr(i, piece), [&](const SseEvent& e) { out.push_back(e); }));
  return out;
}

TEST(SseParser, EventsSurviveAnySplit) {
  const std::string text =
      ": keep-alive comment\r\n"
      "data: {\"a\":1}\r\n\r\n"
      "event: message\n"
      "data: line one\n"
      "data:line two\n\n"
      "id: 7\rdata: cr only\r\r"
      "retry: 10\n\n"  // no data: dropped
      "data: [DONE]\n\n";
  for (size_t piece : {1u, 2u, 3u, 7u, 1000u}) {
    auto ev = parse_all(text, piece);
    ASSERT_EQ(ev.size(), 4u) << "piece " << piece;
    EXPECT_EQ(ev[0].data, "{\"a\":1}");
    EXPECT_EQ(ev[1].event, "message");
    EXPECT_EQ(ev[1].data, "line one\nline two");
    EXPECT_EQ(ev[2].data, "cr only");
    EXPECT_EQ(ev[3].data, "[DONE]");
  }
}

TEST(SseParser, PartialAndOverlongLines) {
  SseParser p;
  int n = 0;
  EXPECT_TRUE(p.feed("data: x", [&](const SseEvent&) { ++n; }));
  EXPECT_TRUE(p.has_partial());
  EXPECT_TRUE(p.feed("\n\n", [&](const SseEvent&) { ++n; }));
  EXPECT_EQ(n, 1);
  EXPECT_FALSE(p.has_partial());
  SseParser small(8);
  EXPECT_FALSE(small.feed("data: 0123456789", [](const SseEvent&) {}));
}

TEST(OpenAiApi, ChunksOfBothEndpoints) {
  auto c = parse_chunk(R"({"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]})",
                       ApiKind::chat);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->content, "Hi");
  auto t =
      parse_chunk(R"({"choices":[{"text":"yo","finish_reason":"length"}]})", ApiKind::completions);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->content, "yo");
  EXPECT_EQ(t->finish_reason, "length");
  auto u = parse_chunk(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}})",
                       ApiKind::chat);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->content, "");
  EXPECT_EQ(u->prompt_tokens.value_or(-1), 3);
  EXPECT_EQ(u->completion_tokens.value_or(-1), 9);
  auto d = parse_chunk("[DONE]", ApiKind::chat);
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->done);
  EXPECT_FALSE(parse_chunk("{oops", ApiKind::chat));
  auto e = parse_chunk(R"({"error":{"message":"overloaded"}})", ApiKind::chat);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().find("overloaded"), std::string::npos);
}

TEST(OpenAiApi, TokenChunksIncludeEmptyTextButNotRoleOrFinish) {
  auto token = [](const char* data, ApiKind api) {
    auto c = parse_chunk(data, api);
    EXPECT_TRUE(c) << data;
    return c && c->token;
  };
  const ApiKind chat = ApiKind::chat, comp = ApiKind::completions;
  EXPECT_TRUE(token(R"({"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]})", chat));
  // Held-back text: a token with no text yet.
  EXPECT_TRUE(token(R"({"choices":[{"delta":{"content":""},"finish_reason":null}]})", chat));
  EXPECT_TRUE(token(R"({"choices":[{"delta":{"reasoning_content":""}}]})", chat));
  EXPECT_TRUE(token(R"({"choices":[{"delta":{"tool_calls":[{"index":0}]}}]})", chat));
  // The role announcement, unless it already carries text.
  EXPECT_FALSE(token(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})", chat));
  EXPECT_TRUE(token(R"({"choices":[{"delta":{"role":"assistant","content":"A"}}]})", chat));
  // Finish-only chunks and usage.
  EXPECT_FALSE(token(R"({"choices":[{"delta":{},"finish_reason":"stop"}]})", chat));
  EXPECT_FALSE(token(R"({"choices":[{"delta":{"content":""},"finish_reason":"stop"}]})", chat));
  EXPECT_TRUE(token(R"({"choices":[{"delta":{"content":"."},"finish_reason":"stop"}]})", chat));
  EXPECT_FALSE(token(R"({"choices":[],"usage":{"completion_tokens":3}})", chat));
  EXPECT_TRUE(token(R"({"choices":[{"text":"","finish_reason":null}]})", comp));
  EXPECT_TRUE(token(R"({"choices":[{"text":"x","finish_reason":"length"}]})", comp));
  EXPECT_FALSE(token(R"({"choices":[{"text":"","finish_reason":"length"}]})", comp));
  EXPECT_FALSE(token("[DONE]", comp));
  // Finish chunks without text are marked: the runner decides with the usage (run_test.cpp).
  auto empty_finish = [](const char* data, ApiKind api) {
    auto c = parse_chunk(data, api);
    EXPECT_TRUE(c) << data;
    return c && c->empty_finish;
  };
  EXPECT_TRUE(empty_finish(R"({"choices":[{"delta":{},"finish_reason":"stop"}]})", chat));
  EXPECT_TRUE(empty_finish(R"({"choices":[{"text":"","finish_reason":"length"}]})", comp));
  EXPECT_FALSE(empty_finish(R"({"choices":[{"text":"x","finish_reason":"length"}]})", comp));
  EXPECT_FALSE(empty_finish(R"({"choices":[{"delta":{"content":""}}]})", chat));
}

TEST(OpenAiApi, RequestBodySendsSampling) {
  WorkItem w;
  w.prompt = "hello";
  w.max_tokens = 4;
  auto greedy = nlohmann::json::parse(build_request_body(w, {ApiKind::completions, "m"}));
  EXPECT_EQ(greedy["temperature"], 0.0);
  EXPECT_FALSE(greedy.contains("top_p"));
  EXPECT_FALSE(greedy.contains("top_k"));
  RequestOptions o{ApiKind::completions, "m"};
  o.temperature = 0.7;
  o.top_p = 0.9;
  o.top_k = 40;
  auto sampled = nlohmann::json::parse(build_request_body(w, o));
  EXPECT_EQ(sampled["temperature"], 0.7);
  EXPECT_EQ(sampled["top_p"], 0.9);
  EXPECT_EQ(sampled["top_k"], 40);
}

TEST(OpenAiApi, RequestBodyStreamsWithUsage) {
  WorkItem w;
  w.messages = nlohmann::json::array({{{"role", "user"}, {"content", "hello"}}});
  w.prompt = "hello";
  w.max_tokens = 17;
  auto chat = nlohmann::json::parse(build_request_body(w, {ApiKind::chat, "m", true}));
  EXPECT_EQ(chat["model"], "m");
  EXPECT_EQ(chat["messages"][0]["content"], "hello");
  EXPECT_EQ(chat["max_tokens"], 17);
  EXPECT_EQ(chat["stream"], true);
  EXPECT_EQ(chat["stream_options"]["include_usage"], true);
  EXPECT_EQ(chat["ignore_eos"], true);
  auto comp = nlohmann::json::parse(build_request_body(w, {ApiKind::completions, "m", false}));
  EXPECT_EQ(comp["prompt"], "hello");
  EXPECT_FALSE(comp.contains("messages"));
  EXPECT_FALSE(comp.contains("ignore_eos"));
}

TEST(HttpClient, ParsesUrls) {
  auto a = parse_url("http://127.0.0.1:8080", ApiKind::chat);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, "8080");
  EXPECT_EQ(a->target, "/v1/chat/completions");
  auto b = parse_url("http://localhost/v1/", ApiKind::completions);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->port, "80");
  EXPECT_EQ(b->target, "/v1/completions");
  auto c = parse_url("http://[::1]:9000/custom/path", ApiKind::chat);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->target, "/custom/path");
  EXPECT_FALSE(parse_url("https://x:1", ApiKind::chat));
  EXPECT_FALSE(parse_url("http://:80", ApiKind::chat));
  EXPECT_FALSE(parse_url("http://h:99999", ApiKind::chat));
}

TEST(Arrivals, PoissonMeanRateAndDispersion) {
  // 20000 exponential gaps at 10/s: the sample mean has sd 0.1/sqrt(20000) = 0.0007 s, so 3%
  // (4 sd) is a safe bound; an exponential's coefficient of variation is 1.
  ArrivalProcess a(10.0, 42);
  const int n = 20000;
  double sum = 0, sumsq = 0;
  for (int i = 0; i < n; ++i) {
    const double g = a.next_gap();
    ASSERT_GE(g, 0.0);
    sum += g;
    sumsq += g * g;
  }
  const double mean = sum / n;
  const double sd = std::sqrt(sumsq / n - mean * mean);
  EXPECT_NEAR(mean, 0.1, 0.003);
  EXPECT_NEAR(sd / mean, 1.0, 0.05);
  // Arrivals in 1 s windows are Poisson(10): index of dispersion (var/mean) near 1.
  ArrivalProcess b(10.0, 7);
  auto t = b.schedule(20000);
  std::vector<int> counts(static_cast<size_t>(t.back()) + 1, 0);
  for (double x : t) ++counts[static_cast<size_t>(x)];
  counts.pop_back();  // last window is partial
  double cm = 0, cv = 0;
  for (int c : counts) cm += c;
  cm /= static_cast<double>(counts.size());
  for (int c : counts) cv += (c - cm) * (c - cm);
  cv /= static_cast<double>(counts.size() - 1);
  EXPECT_NEAR(cm, 10.0, 0.3);
  EXPECT_NEAR(cv / cm, 1.0, 0.15);
}

TEST(Arrivals, SeededAndBurst) {
  ArrivalProcess a(5, 1), b(5, 1);
  EXPECT_EQ(a.schedule(10), b.schedule(10));
  ArrivalProcess burst(std::numeric_limits<double>::infinity(), 1);
  const std::vector<double> all_at_once = burst.schedule(5);
  ASSERT_EQ(all_at_once.size(), 5u);
  for (double t : all_at_once) EXPECT_EQ(t, 0.0);
}

TEST(Sweep, PlansPoints) {
  auto c = plan_points("1, 2,4", "", 0, 1);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->size(), 3u);
  EXPECT_EQ((*c)[2].label, "c=4");
  EXPECT_EQ((*c)[2].request_rate, 0.0);
  auto r = plan_points("", "0.5,inf", 0, 8);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)[0].label, "rate=0.5");
  EXPECT_TRUE(std::isinf((*r)[1].request_rate));
  EXPECT_EQ((*r)[1].concurrency, 8);
  EXPECT_FALSE(plan_points("1,x", "", 0, 1));
  EXPECT_FALSE(plan_points("0", "", 0, 1));
  EXPECT_FALSE(plan_points("1", "2", 0, 1));
  EXPECT_FALSE(parse_rate("-1"));
}

TEST(Report, NiceTicks) {
  const auto u = nice_ticks(0, 1, 5);
  ASSERT_EQ(u.size(), 6u);
  for (size_t i = 0; i < u.size(); ++i) EXPECT_NEAR(u[i], 0.2 * static_cast<double>(i), 1e-12);
  auto t = nice_ticks(0, 730, 6);
  EXPECT_EQ(t.front(), 0);
  EXPECT_GE(t.back(), 730);
  EXPECT_EQ(t[1], 200);
}

}  // namespace
}  // namespace cadenza::loadgen
