// `cadenza serve` in-process: a Server on an ephemeral port over a tiny synthesized model, driven
// by a small Beast client. Covers every endpoint, the OpenAI response shapes (streamed and not),
// every error status, API keys, the queue limit, disconnects (KV blocks come back), the drain,
// request ids and the metrics text (checked by promtool when it is installed).
#include "server/server.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "engine/engine_core.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "request/sampling_json.h"
#include "request/validate_request.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "synth/synth.h"
#include "test_models.h"
#include "running_server.h"
#include "test_client.h"

namespace cadenza::server {
namespace {

using nlohmann::json;
using testing::Client;
using testing::expect_error_shape;
using testing::wait_metric;
using testing::metric_value;
using testing::sse_data;

using testing::Options;
using testing::Running;
using testing::model_path;
using testing::start;

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { shared_ = start().release(); }
  static void TearDownTestSuite() {
    delete shared_;
    shared_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(shared_, nullptr); }
  static uint16_t port() { return shared_->port; }
  static inline Running* shared_ = nullptr;
};

TEST_F(ServerTest, HealthReadyModels) {
  auto h = testing::get(port(), "/health");
  EXPECT_EQ(h.status, 200);
  auto r = testing::get(port(), "/ready");
  EXPECT_EQ(r.status, 200);
  auto m = testing::get(port(), "/v1/models");
  ASSERT_EQ(m.status, 200);
  json j = m.json();
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "tiny");
  EXPECT_EQ(j["data"][0]["object"], "model");
}

TEST_F(ServerTest, CompletionNonStreamed) {
  json req = {{"model", "tiny"}, {"prompt", "Hello"}, {"max_tokens", 8}, {"seed", 7},
              {"ignore_eos", true}};
  auto r = testing::post(port(), "/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/json");
  json j = r.json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_TRUE(j["created"].is_number_integer());
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_TRUE(j["choices"][0]["text"].is_string());
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 6);  // BOS + 5 byte tokens
  EXPECT_EQ(j["usage"]["total_tokens"], 14);
  // The same seed gives the same text.
  auto again = testing::post(port(), "/v1/completions", req);
  EXPECT_EQ(again.json()["choices"][0]["text"], j["choices"][0]["text"]);
}

TEST_F(ServerTest, ChatNonStreamed) {
  json req = {{"messages", {{{"role", "system"}, {"content", "Be brief."}},
                            {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi"}}}}}}},
              {"max_completion_tokens", 5},
              {"temperature", 0}};
  auto r = testing::post(port(), "/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(j["choices"][0]["message"]["content"].is_string());
  EXPECT_TRUE(j["choices"][0]["finish_reason"] == "length" ||
              j["choices"][0]["finish_reason"] == "stop");
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 10);
  EXPECT_LE(j["usage"]["completion_tokens"].get<int>(), 5);
}

TEST_F(ServerTest, StreamedCompletionFormat) {
  json req = {{"prompt", "Once"}, {"max_tokens", 12}, {"seed", 3}, {"stream", true},
              {"ignore_eos", true}, {"stream_options", {{"include_usage", true}}}};
  auto r = testing::post(port(), "/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "text/event-stream");
  auto events = sse_data(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text, id, finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json c = json::parse(events[i], nullptr, false);
    ASSERT_TRUE(c.is_object()) << events[i];
    EXPECT_EQ(c["object"], "text_completion");
    if (id.empty()) id = c["id"];
    EXPECT_EQ(c["id"], id);
    EXPECT_EQ(c["model"], "tiny");
    EXPECT_TRUE(c.contains("usage"));
    if (c["choices"].empty()) {  // the usage chunk, last before [DONE]
      EXPECT_EQ(i + 2, events.size());
      EXPECT_EQ(c["usage"]["completion_tokens"], 12);
      EXPECT_EQ(c["usage"]["prompt_tokens"], 5);
      continue;
    }
    EXPECT_TRUE(c["usage"].is_null());
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(finish, "length");
  // Same seed, not streamed: the same text.
  req.erase("stream");
  req.erase("stream_options");
  auto whole = testing::post(port(), "/v1/completions", req);
  EXPECT_EQ(whole.json()["choices"][0]["text"], text);
}

TEST_F(ServerTest, StreamedChatFormat) {
  json req = {{"messages", {{{"role", "user"}, {"content", "Hello there"}}}},
              {"max_tokens", 6}, {"stream", true}, {"ignore_eos", true}, {"seed", 1}};
  auto r = testing::post(port(), "/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  auto events = sse_data(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  json first = json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_FALSE(first.contains("usage"));  // only with include_usage
  json last = json::parse(events[events.size() - 2]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(last["choices"][0]["delta"].is_object());
  for (size_t i = 0; i + 1 < events.size(); ++i)
    EXPECT_TRUE(json::parse(events[i], nullptr, false).is_object()) << events[i];
}

TEST_F(ServerTest, StopString) {
  json req = {{"prompt", "abc"}, {"max_tokens", 40}, {"temperature", 0}, {"ignore_eos", true}};
  auto r = testing::post(port(), "/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string text = r.json()["choices"][0]["text"];
  // An ASCII letter or digit that occurs after the first character.
  size_t k = std::string::npos;
  for (size_t i = 1; i < text.size(); ++i)
    if (std::isalnum(static_cast<unsigned char>(text[i]))) {
      k = i;
      break;
    }
  // Greedy decoding of the fixed test model is deterministic: no such character means the model
  // or prompt changed and this test needs another prompt (not a skip: it would never run).
  ASSERT_NE(k, std::string::npos) << "no ASCII letter or digit in the greedy output: " << text;
  const std::string stop(1, text[k]);
  req["stop"] = json::array({stop, "\x01never"});
  auto s = testing::post(port(), "/v1/completions", req);
  ASSERT_EQ(s.status, 200) << s.body;
  json j = s.json();
  EXPECT_EQ(j["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServerTest, SeveralChoices) {
  json req = {{"prompt", "xyz"}, {"max_tokens", 5}, {"n", 3}, {"seed", 11}, {"ignore_eos", true}};
  auto r = testing::post(port(), "/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  ASSERT_EQ(j["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(j["choices"][i]["index"], i);
  EXPECT_EQ(j["usage"]["completion_tokens"], 15);
  // Choice i uses seed + i.
  json one = {{"prompt", "xyz"}, {"max_tokens", 5}, {"seed", 12}, {"ignore_eos", true}};
  auto o = testing::post(port(), "/v1/completions", one);
  EXPECT_EQ(o.json()["choices"][0]["text"], j["choices"][1]["text"]);
  // Streamed: every index ends.
  req["stream"] = true;
  auto s = testing::post(port(), "/v1/completions", req);
  auto events = sse_data(s.body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  std::set<int> finished;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json c = json::parse(events[i]);
    if (!c["choices"][0]["finish_reason"].is_null()) finished.insert(c["choices"][0]["index"].get<int>());
  }
  EXPECT_EQ(finished.size(), 3u);
}

TEST_F(ServerTest, TokenizeDetokenize) {
  auto t = testing::post(port(), "/tokenize", {{"prompt", "Hello world"}, {"add_special", false}});
  ASSERT_EQ(t.status, 200) << t.body;
  json j = t.json();
  EXPECT_EQ(j["count"], 11);
  EXPECT_EQ(j["tokens"].size(), 11u);
  auto withbos = testing::post(port(), "/tokenize", {{"prompt", "Hello world"}});
  EXPECT_EQ(withbos.json()["count"], 12);
  auto d = testing::post(port(), "/detokenize", {{"tokens", j["tokens"]}});
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.json()["prompt"], "Hello world");
  auto m = testing::post(port(), "/tokenize",
                         {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_GT(m.json()["count"].get<int>(), 5);
  expect_error_shape(testing::post(port(), "/detokenize", {{"tokens", {1, 99999}}}), 400);
  expect_error_shape(testing::post(port(), "/tokenize", {{"nothing", 1}}), 400);
}

// The server's 400s for requests that cannot run are validate_request's (the engine's rules, one
// function): the same message, and its parameter as OpenAI's `param`.
TEST_F(ServerTest, RejectionsAreValidateRequestsWithTheirParam) {
  Client c(port());
  const RequestLimits limits{shared_->tokenizer->n_vocab(), Options{}.max_model_len};
  const std::vector<int32_t> prompt = {1, 2, 3};
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"top_p", 0}}, "top_p"},
      {{{"repetition_penalty", 0}}, "repetition_penalty"},
      {{{"stop", {"ok", ""}}}, "stop"},
      {{{"max_tokens", 2}, {"min_tokens", 3}}, "min_tokens"},
      {{{"max_tokens", limits.max_model_len - 2}}, "max_tokens"},
      {{{"logit_bias", {{std::to_string(limits.n_vocab), 1}}}}, "logit_bias"},
      {{{"stop_token_ids", {limits.n_vocab}}}, "stop_token_ids"},
      {{{"prompt", {1, limits.n_vocab}}}, "prompt"},
  };
  for (const auto& [fields, param] : cases) {
    json body = {{"prompt", prompt}, {"max_tokens", 4}};
    for (const auto& [k, v] : fields.items()) body[k] = v;
    SamplingParams p = openai_sampling_defaults();
    ASSERT_FALSE(read_sampling_params(body, p)) << body.dump();
    std::vector<int32_t> ids = body["prompt"].get<std::vector<int32_t>>();
    const auto expected = validate_request(ids, p, limits);
    ASSERT_TRUE(expected) << body.dump();
    ASSERT_EQ(expected->param, param);
    auto r = c.post("/v1/completions", body);
    expect_error_shape(r, 400);
    EXPECT_EQ(r.json()["error"]["message"], expected->message) << body.dump();
    EXPECT_EQ(r.json()["error"]["param"], param) << body.dump();
  }
  // A chat prompt that leaves no room names `messages`.
  auto chat = c.post("/v1/chat/completions",
                     {{"messages", {{{"role", "user"}, {"content", std::string(1100, 'a')}}}}});
  expect_error_shape(chat, 400);
  EXPECT_EQ(chat.json()["error"]["param"], "messages");
}

TEST_F(ServerTest, ErrorStatuses) {
  Client c(port());
  expect_error_shape(c.request("POST", "/v1/completions", "{not json"), 400);
  expect_error_shape(c.request("POST", "/v1/completions", "[1,2]"), 400);
  expect_error_shape(c.post("/v1/completions", {{"prompt", "x"}, {"temperature", 5}}), 400);
  expect_error_shape(c.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 0}}), 400);
  expect_error_shape(c.post("/v1/completions", {{"prompt", 5}}), 400);
  expect_error_shape(c.post("/v1/completions", {{"prompt", "x"}, {"stop", {""}}}), 400);
  expect_error_shape(c.post("/v1/chat/completions", {{"messages", json::array()}}), 400);
  expect_error_shape(c.post("/v1/completions", {{"prompt", "x"}, {"stream_options", json::object()}}), 400);
  // Not supported yet: a clear 400, not silently ignored.
  auto unsupported = c.post("/v1/completions", {{"prompt", "x"}, {"echo", true}});
  expect_error_shape(unsupported, 400);
  EXPECT_NE(unsupported.json()["error"]["message"].get<std::string>().find("not supported"),
            std::string::npos);
  EXPECT_EQ(unsupported.json()["error"]["param"], "echo");
  expect_error_shape(c.post("/v1/completions", {{"prompt", "x"}, {"best_of", 2}}), 400);
  expect_error_shape(c.post("/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"99999", 1}}}}), 400);
  expect_error_shape(c.post("/v1/completions", {{"prompt", "x"}, {"presence_penalty", 2.5}}), 400);
  expect_error_shape(c.post("/v1/chat/completions",
                            {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"top_logprobs", 2}}),
                     400);
  expect_error_shape(c.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"min_tokens", 3}}),
                     400);
  // Neutral values are fine.
  EXPECT_EQ(c.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}, {"presence_penalty", 0},
                                       {"logit_bias", json::object()}, {"user", "u1"}, {"echo", false}})
                .status,
            200);
  // Prompt longer than the context.
  expect_error_shape(c.post("/v1/completions", {{"prompt", std::string(1100, 'a')}}), 400);
  expect_error_shape(c.post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 1022}}), 400);
  // Unknown model, unknown route, wrong method.
  auto unknown_model = c.post("/v1/completions", {{"prompt", "x"}, {"model", "gpt-9"}});
  expect_error_shape(unknown_model, 404);
  EXPECT_EQ(unknown_model.json()["error"]["code"], "model_not_found");
  expect_error_shape(c.get("/v2/nothing"), 404);
  auto wrong = c.get("/v1/completions");
  expect_error_shape(wrong, 405);
  EXPECT_EQ(wrong.header("allow"), "POST");
  EXPECT_EQ(c.post("/health", json::object()).status, 405);
  // The connection survived all of that (keep-alive).
  EXPECT_EQ(c.get("/health").status, 200);
  // Body too large: 413.
  Client big(port());
  auto r = big.request("POST", "/v1/completions",
                       json{{"prompt", std::string(100 * 1024, 'a')}}.dump());
  expect_error_shape(r, 413);
}

TEST_F(ServerTest, LogprobsPenaltiesAndBias) {
  // Completions: `logprobs: 2` gives per-token entries with at most 2 alternatives.
  json req = {{"prompt", "Hey"}, {"max_tokens", 4}, {"logprobs", 2}, {"seed", 1}, {"ignore_eos", true}};
  auto r = testing::post(port(), "/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  json lp = r.json()["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << r.body;
  EXPECT_EQ(lp["tokens"].size(), 4u);
  EXPECT_EQ(lp["token_logprobs"].size(), 4u);
  EXPECT_EQ(lp["text_offset"].size(), 4u);
  ASSERT_EQ(lp["top_logprobs"].size(), 4u);
  for (const auto& t : lp["top_logprobs"]) EXPECT_LE(t.size(), 2u);
  for (const auto& v : lp["token_logprobs"]) EXPECT_LE(v.get<double>(), 0.0);
  // Streamed: the entries arrive with the chunks.
  req["stream"] = true;
  auto s = testing::post(port(), "/v1/completions", req);
  size_t streamed = 0;
  for (const auto& e : sse_data(s.body)) {
    if (e == "[DONE]") break;
    json c = json::parse(e);
    if (c["choices"][0]["logprobs"].is_object())
      streamed += c["choices"][0]["logprobs"]["tokens"].size();
  }
  EXPECT_EQ(streamed, 4u);
  // Chat: logprobs + top_logprobs.
  auto chat = testing::post(port(), "/v1/chat/completions",
                            {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                             {"max_tokens", 3}, {"logprobs", true}, {"top_logprobs", 3},
                             {"ignore_eos", true}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  json content = chat.json()["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 3u) << chat.body;
  EXPECT_TRUE(content[0]["token"].is_string());
  EXPECT_TRUE(content[0]["bytes"].is_array());
  EXPECT_EQ(content[0]["top_logprobs"].size(), 3u);
  // A large positive bias on one token makes greedy decoding pick it every time.
  auto biased = testing::post(port(), "/v1/completions",
                              {{"prompt", "Hey"}, {"max_tokens", 5}, {"temperature", 0},
                               {"logit_bias", {{"65", 100}}}, {"ignore_eos", true}});
  ASSERT_EQ(biased.status, 200) << biased.body;
  EXPECT_EQ(biased.json()["choices"][0]["text"], "AAAAA");  // byte token 65 is 'A'
  // Penalties are accepted and change nothing about the shape.
  auto pen = testing::post(port(), "/v1/completions",
                           {{"prompt", "Hey"}, {"max_tokens", 5}, {"presence_penalty", 1.5},
                            {"frequency_penalty", -0.5}, {"repetition_penalty", 1.2},
                            {"min_tokens", 2}});
  EXPECT_EQ(pen.status, 200) << pen.body;
}

TEST_F(ServerTest, RequestIdHeader) {
  Client c(port());
  auto r = c.request("GET", "/health", "", {{"X-Request-Id", "my-id-123"}});
  EXPECT_EQ(r.header("x-request-id"), "my-id-123");
  auto g = c.get("/health");
  EXPECT_EQ(g.header("x-request-id").rfind("req-", 0), 0u);
}

// Its own server on the slow model: the tiny model writes its 1,000 tokens in ~30 ms, so a client
// descheduled that long between its first chunk and the hang-up (a loaded machine) saw the
// request finish instead of being aborted, and the abort count never came.
TEST_F(ServerTest, DisconnectMidStreamFreesKv) {
  Options o;
  o.model_path = testing::slow_model_path();
  o.max_model_len = testing::kSlowModelLen;
  auto slow = start(o);
  ASSERT_NE(slow, nullptr);
  const uint16_t p = slow->port;
  const auto before = testing::get(p, "/metrics");
  const double aborts_before =
      metric_value(before.body, "cadenza_request_success_total{finished_reason=\"abort\"}");
  Client c(p);
  json req = {{"prompt", "Long story"},
              {"max_tokens", testing::kSlowModelLen - 256},
              {"stream", true},
              {"ignore_eos", true}};
  const std::string body = req.dump();
  ASSERT_TRUE(c.send_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         "application/json\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body));
  std::string got;
  while (got.find("data: ") == std::string::npos) {
    std::string s = c.read_some();
    ASSERT_FALSE(s.empty());
    got += s;
  }
  c.close();
  EXPECT_TRUE(wait_metric(p, "cadenza_request_success_total{finished_reason=\"abort\"}",
                          aborts_before + 1));
  EXPECT_TRUE(wait_metric(p, "cadenza_kv_cache_usage_ratio", 0));
  EXPECT_TRUE(wait_metric(p, "cadenza_num_requests_running", 0));
}

// The engine thread publishes the gauges after each step and before it delivers the step's
// outputs, so a scrape right after a reply never still counts that request as running or waiting
// (it did: the gauges came after the delivery, and a client that scraped at once could see its
// own finished request; RouterTest.UnloadWaitsForRequestsInFlight failed on that in CI).
TEST_F(ServerTest, AScrapeAfterAReplyNoLongerCountsTheRequest) {
  for (int i = 0; i < 40; ++i) {
    ASSERT_EQ(testing::post(port(), "/v1/completions", {{"prompt", "g"}, {"max_tokens", 2}}).status,
              200);
    const std::string m = testing::get(port(), "/metrics").body;
    ASSERT_EQ(metric_value(m, "cadenza_num_requests_running"), 0) << "after request " << i;
    ASSERT_EQ(metric_value(m, "cadenza_num_requests_waiting"), 0) << "after request " << i;
  }
}

TEST_F(ServerTest, MetricsText) {
  ASSERT_EQ(testing::post(port(), "/v1/completions", {{"prompt", "m"}, {"max_tokens", 3}}).status, 200);
  // The HTTP counter of a request is recorded once its response has been written, which can be
  // just after the client has read it: wait (up to 60 s: the I/O thread may be descheduled on a
  // loaded machine) until the scrape shows it.
  const std::string http_sample = "cadenza_http_requests_total{route=\"/v1/completions\",status=\"200\"}";
  auto m = testing::get(port(), "/metrics");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (m.body.find(http_sample) == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    m = testing::get(port(), "/metrics");
  }
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.header("content-type").rfind("text/plain; version=0.0.4", 0), 0u);
  for (const char* name :
       {"cadenza_time_to_first_token_seconds", "cadenza_inter_token_latency_seconds",
        "cadenza_e2e_request_latency_seconds", "cadenza_request_queue_time_seconds",
        "cadenza_num_requests_running", "cadenza_num_requests_waiting",
        "cadenza_kv_cache_usage_ratio", "cadenza_prompt_tokens_total",
        "cadenza_generation_tokens_total", "cadenza_prefix_cache_queries_total",
        "cadenza_prefix_cache_hits_total", "cadenza_num_preemptions_total",
        "cadenza_request_success_total", "cadenza_http_requests_total",
        "cadenza_spec_decode_num_drafts_total", "cadenza_spec_decode_num_draft_tokens_total",
        "cadenza_spec_decode_num_accepted_tokens_total", "cadenza_engine_step_seconds_total"}) {
    EXPECT_NE(m.body.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
    EXPECT_NE(m.body.find(std::string("# HELP ") + name + " "), std::string::npos) << name;
  }
  EXPECT_GE(metric_value(m.body, "cadenza_e2e_request_latency_seconds_count"), 1);
  EXPECT_GE(metric_value(m.body, "cadenza_generation_tokens_total"), 3);
  // The engine's step timers: the request's steps ran the model and sampled.
  EXPECT_GT(metric_value(m.body, "cadenza_engine_step_seconds_total{phase=\"forward\"}"), 0);
  EXPECT_GT(metric_value(m.body, "cadenza_engine_step_seconds_total{phase=\"sample\"}"), 0);
  EXPECT_NE(m.body.find(http_sample), std::string::npos);
  // Every sample line is "name[{labels}] number".
  std::istringstream in(m.body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    ASSERT_NE(sp, std::string::npos) << line;
    const std::string v = line.substr(sp + 1);
    char* end = nullptr;
    std::strtod(v.c_str(), &end);
    EXPECT_TRUE(v == "+Inf" || (end && *end == '\0')) << line;
  }
  if (std::system("command -v promtool > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool is not installed: `promtool check metrics` skipped";
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("metrics-" + std::to_string(::getpid()) + ".txt"))
                               .string();
  std::ofstream(file) << m.body;
  const int rc = std::system(("promtool check metrics < " + file).c_str());
  std::filesystem::remove(file);
  EXPECT_EQ(rc, 0) << m.body;
}

TEST(ServerKeys, UnauthorizedAndAuthorized) {
  Options o;
  o.keys = {"sekrit", "other-key"};
  auto s = start(o);
  ASSERT_NE(s, nullptr);
  const uint16_t p = s->port;
  json req = {{"prompt", "k"}, {"max_tokens", 2}};
  expect_error_shape(testing::post(p, "/v1/completions", req), 401);
  expect_error_shape(testing::post(p, "/v1/completions", req, {{"Authorization", "Bearer wrong"}}), 401);
  expect_error_shape(testing::post(p, "/v1/completions", req, {{"Authorization", "Bearer sekri"}}), 401);
  expect_error_shape(testing::get(p, "/v1/models"), 401);
  EXPECT_EQ(testing::post(p, "/v1/completions", req, {{"Authorization", "Bearer sekrit"}}).status, 200);
  EXPECT_EQ(testing::post(p, "/v1/completions", req, {{"Authorization", "Bearer other-key"}}).status, 200);
  EXPECT_EQ(testing::get(p, "/health").status, 200);
  EXPECT_EQ(testing::get(p, "/metrics").status, 200);
}

// The slow model: the holder must still run when the second request comes (the tiny model's
// 1,000 tokens take ~30 ms, less than a loaded machine may take to send it).
TEST(ServerQueue, FullQueueGets429) {
  Options o;
  o.max_num_seqs = 1;
  o.max_queue = 0;
  o.model_path = testing::slow_model_path();
  o.max_model_len = testing::kSlowModelLen;
  auto s = start(o);
  ASSERT_NE(s, nullptr);
  const uint16_t p = s->port;
  Client c(p);
  json req = {{"prompt", "Long"},
              {"max_tokens", testing::kSlowModelLen - 256},
              {"stream", true},
              {"ignore_eos", true}};
  const std::string body = req.dump();
  ASSERT_TRUE(c.send_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body));
  std::string got = c.read_some();
  ASSERT_NE(got.find("200"), std::string::npos);
  auto r = testing::post(p, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}});
  expect_error_shape(r, 429);
  EXPECT_EQ(r.header("retry-after"), "1");
  c.close();
  EXPECT_TRUE(wait_metric(p, "cadenza_kv_cache_usage_ratio", 0));
  // Room again once the first request is gone. The server notices the closed connection at its
  // next write and the abort lands a step later (the KV gauge above may still show the value from
  // before the stream's first step): slow under ASan on a loaded machine, so a generous deadline.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool ok = false;
  while (!(ok = testing::post(p, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}}).status ==
                200) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(ok);
}

// Every way a generation's connection ends gives its open-generations count back (the drain's
// last wait, up to 2 s, is for that count): a non-streamed and a streamed answer followed by
// another request on the same connection, and a client that disconnects mid-stream. With nothing
// in flight the drain then ends at once.
TEST(ServerDrain, EndedConnectionsHoldNoGeneration) {
  auto s = start();
  ASSERT_NE(s, nullptr);
  const uint16_t p = s->port;
  {
    Client keep(p);
    ASSERT_EQ(keep.post("/v1/completions", {{"prompt", "a"}, {"max_tokens", 3}}).status, 200);
    auto streamed = keep.post("/v1/completions", {{"prompt", "b"}, {"max_tokens", 3}, {"stream", true}});
    ASSERT_EQ(streamed.status, 200);
    EXPECT_NE(streamed.body.find("[DONE]"), std::string::npos);
    ASSERT_EQ(keep.get("/health").status, 200);  // the connection still reads requests
  }
  {
    Client gone(p);
    const std::string body =
        json{{"prompt", "c"}, {"max_tokens", 1000}, {"stream", true}, {"ignore_eos", true}}.dump();
    ASSERT_TRUE(gone.send_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body));
    std::string got;
    while (got.find("data: ") == std::string::npos) {
      std::string chunk = gone.read_some();
      ASSERT_FALSE(chunk.empty());
      got += chunk;
    }
    gone.close();
  }
  EXPECT_TRUE(wait_metric(p, "cadenza_num_requests_running", 0));
  EXPECT_TRUE(wait_metric(p, "cadenza_kv_cache_usage_ratio", 0));
  // The gauges above may still show the 0 published before gone's first step (they are published
  // after each step's replies), and gone's session notices the hang-up only at its next write: so
  // wait for the count itself (one held by an ended connection is never given back; 60 s only
  // bounds a loaded machine's delay) before timing the drain, which must then have nothing to
  // wait for.
  auto& open = s->server->context().open_generations;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (open.load() != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(open.load(), 0) << "an ended connection still holds an open generation";
  const auto t0 = std::chrono::steady_clock::now();
  s->server->request_drain();
  s->server->wait();
  const double drain_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(drain_s, 1.5) << "a connection still held an open generation";
}

TEST(ServerDrain, InFlightCompletesNewRefused) {
  auto s = start();
  ASSERT_NE(s, nullptr);
  const uint16_t p = s->port;
  // Keep-alive connections opened before the drain (each ends after its next response).
  Client idle(p), idle2(p);
  ASSERT_EQ(idle.get("/health").status, 200);
  ASSERT_EQ(idle2.get("/health").status, 200);
  Client c(p);
  json req = {{"prompt", "Drain"}, {"max_tokens", 400}, {"stream", true}, {"ignore_eos", true}};
  const std::string body = req.dump();
  ASSERT_TRUE(c.send_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  std::string got = c.read_some();
  ASSERT_NE(got.find("200"), std::string::npos);
  s->server->request_drain();
  EXPECT_FALSE(s->server->ready());
  expect_error_shape(idle.get("/ready"), 503);
  auto refused = idle2.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}});
  expect_error_shape(refused, 503);
  EXPECT_EQ(refused.header("connection"), "close");
  // The in-flight stream runs to its end.
  for (std::string chunk; !(chunk = c.read_some()).empty();) got += chunk;
  EXPECT_NE(got.find("data: [DONE]"), std::string::npos);
  EXPECT_NE(got.find("\"finish_reason\":\"length\""), std::string::npos);
  s->server->wait();
}

TEST(ServerDrain, TimeoutAbortsTheRest) {
  Options o;
  o.max_model_len = 2048;
  o.drain_timeout_s = 0;
  auto s = start(o);
  ASSERT_NE(s, nullptr);
  Client c(s->port);
  json req = {{"prompt", "Drain"}, {"max_tokens", 2000}, {"stream", true}, {"ignore_eos", true}};
  const std::string body = req.dump();
  ASSERT_TRUE(c.send_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body));
  std::string got = c.read_some();
  ASSERT_NE(got.find("200"), std::string::npos);
  s->server->request_drain();
  s->server->wait();  // returns: the request was aborted, not waited for
  for (std::string chunk; !(chunk = c.read_some()).empty();) got += chunk;
  EXPECT_EQ(got.find("\"finish_reason\":\"length\""), std::string::npos);
}

}  // namespace
}  // namespace cadenza::server

namespace cadenza::server {
namespace {

// Random and mutated bodies over HTTP: the server always answers 2xx or 4xx and stays healthy.
TEST_F(ServerTest, FuzzBodiesOverHttp) {
  std::mt19937 rng(99);
  const std::string bases[] = {
      R"({"prompt":"hi","max_tokens":3,"stream":true,"n":2,"seed":4,"stop":["q"]})",
      R"({"messages":[{"role":"user","content":"yo"}],"max_tokens":3,"temperature":0.7})",
      R"({"prompt":[1,2,3],"max_tokens":2,"top_k":5,"min_p":0.1})",
  };
  const char* targets[] = {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"};
  auto c = std::make_unique<Client>(port());
  for (int i = 0; i < 150; ++i) {
    std::string body = testing::mutate(bases[rng() % std::size(bases)], rng);
    if (!c->connected()) c = std::make_unique<Client>(port());
    auto r = c->request("POST", targets[rng() % std::size(targets)], body);
    ASSERT_TRUE(r.ok) << body;
    EXPECT_TRUE((r.status >= 200 && r.status < 300) || (r.status >= 400 && r.status < 500))
        << r.status << " " << body;
    if (r.status >= 400) expect_error_shape(r, r.status);
  }
  EXPECT_EQ(testing::get(port(), "/health").status, 200);
  EXPECT_TRUE(wait_metric(port(), "cadenza_kv_cache_usage_ratio", 0));
}

}  // namespace
}  // namespace cadenza::server

namespace cadenza::server {
namespace {

// The chat renderer: the BOS rule, and (with the Jinja interpreter) a custom template.
TEST(ChatRenderer, BosIsNotDoubled) {
  auto backend = kernels::make_cpu_backend({.n_threads = 1});
  auto m = model::Model::open(model_path(), *backend);
  ASSERT_TRUE(m.ok()) << m.error();
  auto tok = Tokenizer::from_gguf((*m)->file());
  ASSERT_TRUE(tok.ok()) << tok.error();
  const Tokenizer& t = **tok;
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array(
      {{{"role", "user"}, {"content", "Hi"}}});
#ifdef CADENZA_SERVER_HAS_TEMPLATE
  auto r = ChatRenderer::create((*m)->file(), t,
                                "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}"
                                "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}");
  ASSERT_TRUE(r.ok()) << r.error();
  auto text = (*r)->render(msgs, nullptr, true);
  ASSERT_TRUE(text.ok()) << text.error();
  const std::string bos = t.token_piece(t.bos_id(), true);
  EXPECT_EQ(*text, bos + "[user]Hi[assistant]");
  auto ids = (*r)->encode(*text);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], t.bos_id());
  EXPECT_NE(ids[1], t.bos_id());  // the template's BOS only
  auto bad = ChatRenderer::create((*m)->file(), t, "{% for %}");
  EXPECT_FALSE(bad.ok());
#endif
  // The built-in ChatML (no template in the model): BOS is added once by the tokenizer.
  auto chatml = ChatRenderer::create((*m)->file(), t, "");
  ASSERT_TRUE(chatml.ok()) << chatml.error();
  auto text2 = (*chatml)->render(msgs, nullptr, true);
  ASSERT_TRUE(text2.ok()) << text2.error();
  EXPECT_EQ(*text2, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  auto ids2 = (*chatml)->encode(*text2);
  ASSERT_GE(ids2.size(), 2u);
  EXPECT_EQ(ids2[0], t.bos_id());
  EXPECT_NE(ids2[1], t.bos_id());
}

// MoE routing statistics become one counter per layer and expert, in valid exposition format.
TEST(MetricsText, ExpertTokensPerLayerAndExpert) {
  Metrics m;
  EngineGauges g;
  g.moe_layers = 2;
  g.moe_experts = 3;
  g.expert_tokens = {5, 0, 7, 1, 2, 9};
  m.set_engine_gauges(g);
  const std::string text = m.render();
  EXPECT_NE(text.find("# TYPE cadenza_moe_expert_tokens_total counter"), std::string::npos);
  EXPECT_NE(text.find("cadenza_moe_expert_tokens_total{layer=\"0\",expert=\"2\"} 7\n"),
            std::string::npos);
  EXPECT_NE(text.find("cadenza_moe_expert_tokens_total{layer=\"1\",expert=\"2\"} 9\n"),
            std::string::npos);
  // Dense models export no expert series.
  Metrics dense;
  dense.set_engine_gauges(EngineGauges{});
  EXPECT_EQ(dense.render().find("cadenza_moe_expert_tokens_total"), std::string::npos);
  if (std::system("command -v promtool > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool is not installed: `promtool check metrics` skipped";
  const std::string file = ::testing::TempDir() + "/cadenza_moe_metrics.txt";
  std::ofstream(file) << text;
  EXPECT_EQ(std::system(("promtool check metrics < " + file).c_str()), 0) << text;
}

// Speculative decoding's acceptance per draft position: one series per position that had drafts.
TEST(MetricsText, SpecDecodeAcceptedPerPosition) {
  Metrics m;
  EngineGauges g;
  g.spec_num_drafts = 10;
  g.spec_num_draft_tokens = 30;
  g.spec_num_accepted_tokens = 12;
  g.spec_accepted_per_position = {7, 4, 1};
  m.set_engine_gauges(g);
  const std::string text = m.render();
  EXPECT_NE(text.find("# TYPE cadenza_spec_decode_num_accepted_tokens_per_pos_total counter"),
            std::string::npos);
  EXPECT_NE(text.find("cadenza_spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 7\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("cadenza_spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"} 1\n"),
            std::string::npos) << text;
  EXPECT_EQ(text.find("position=\"3\""), std::string::npos);
  Metrics off;
  off.set_engine_gauges(EngineGauges{});
  EXPECT_EQ(off.render().find("cadenza_spec_decode_num_accepted_tokens_per_pos_total{"), std::string::npos);
}

}  // namespace
}  // namespace cadenza::server
