// POST /v1/embeddings and POST /v1/rerank against an in-process server: the vectors against the
// model's hidden states computed directly (Session::hidden_all + pooling), every input shape,
// base64, dimensions, usage, the 400/404/401/503 answers in OpenAI's error shape, and the
// Qwen3-Reranker-style scores against the model's own yes/no logits (a ../shared model with a
// real Qwen vocabulary; skipped without it).
#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "server/engine_bridge.h"
#include "server/metrics.h"
#include "model/pooling.h"
#include "model/session.h"
#include "running_server.h"
#include "server/embeddings_protocol.h"
#include "server/embeddings_routes.h"
#include "shared_data.h"
#include "synth/synth.h"
#include "temp_dir.h"
#include "test_client.h"

namespace cadenza::server {
namespace {

using nlohmann::json;
using testing::Client;

// What the server should answer: computed on the test's own copy of the model.
std::vector<float> expected_vector(const testing::Running& r, const std::vector<int32_t>& tokens,
                                   model::Pooling pooling) {
  auto backend = kernels::make_cpu_backend({.n_threads = 1});
  auto m = model::Model::open(testing::model_path(), *backend);
  EXPECT_TRUE(m);
  auto s = model::Session::create(**m, {.max_tokens = 256, .max_batch_tokens = 32});
  EXPECT_TRUE(s);
  auto h = (*s)->hidden_all(tokens);
  EXPECT_TRUE(h);
  std::vector<float> v = model::pool(*h, static_cast<int64_t>(tokens.size()),
                                     (*m)->config().n_embd, pooling);
  model::l2_normalize(v);
  (void)r;
  return v;
}

std::vector<float> floats(const json& a) { return a.get<std::vector<float>>(); }

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
  return d;
}

void expect_error(const testing::Response& res, int status, const std::string& param) {
  EXPECT_EQ(res.status, status) << res.body;
  const json j = res.json();
  ASSERT_TRUE(j.contains("error")) << res.body;
  EXPECT_TRUE(j["error"]["message"].is_string());
  EXPECT_TRUE(j["error"]["type"].is_string());
  if (!param.empty()) {
    EXPECT_EQ(j["error"]["param"], param) << res.body;
  }
}

TEST(EmbeddingsProtocol, Base64IsLittleEndianFloat32) {
  EXPECT_EQ(base64_floats({1.0f}), "AACAPw==");           // 00 00 80 3F
  EXPECT_EQ(base64_floats({1.0f, -2.0f}), "AACAPwAAAMA=");  // + 00 00 00 C0
  EXPECT_EQ(base64_floats({}), "");
}

TEST(EmbeddingsProtocol, RerankResultsSortedAndCut) {
  RerankRequest r;
  r.documents = {"a", "b", "c"};
  r.top_n = 2;
  r.return_documents = true;
  const json j = rerank_response(r, {0.2, 0.9, 0.5}, "m", 7);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["index"], 1);
  EXPECT_EQ(j["results"][0]["document"]["text"], "b");
  EXPECT_EQ(j["results"][1]["index"], 2);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 7);
}

TEST(EmbeddingsServer, VectorsAreThePooledHiddenStates) {
  testing::Options o;
  o.pooling = "mean";
  auto r = testing::start(o);
  ASSERT_NE(r, nullptr);
  Client c(r->port);
  const std::string text = "hello embeddings";
  const std::vector<int32_t> tokens = r->tokenizer->encode(text, true, false);
  const std::vector<float> want = expected_vector(*r, tokens, model::Pooling::kMean);
  const int64_t d = r->model->config().n_embd;

  auto res = c.post("/v1/embeddings", {{"input", text}, {"model", "tiny"}});
  ASSERT_EQ(res.status, 200) << res.body;
  json j = res.json();
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["object"], "embedding");
  EXPECT_EQ(j["data"][0]["index"], 0);
  const std::vector<float> got = floats(j["data"][0]["embedding"]);
  ASSERT_EQ(static_cast<int64_t>(got.size()), d);
  EXPECT_LT(max_diff(got, want), 1e-5);
  double norm = 0;
  for (float x : got) norm += static_cast<double>(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-5);
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens.size());
  EXPECT_EQ(j["usage"]["total_tokens"], tokens.size());

  // The same tokens given as ids, as one sequence and as an array of arrays with a second input.
  res = c.post("/v1/embeddings", {{"input", tokens}});
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_LT(max_diff(floats(res.json()["data"][0]["embedding"]), want), 1e-6);
  const std::vector<int32_t> other = {5, 6, 7, 8, 9};
  res = c.post("/v1/embeddings", {{"input", json::array({other, tokens})}});
  ASSERT_EQ(res.status, 200) << res.body;
  j = res.json();
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][1]["index"], 1);
  EXPECT_LT(max_diff(floats(j["data"][1]["embedding"]), want), 1e-6);
  const std::vector<float> first = floats(j["data"][0]["embedding"]);
  EXPECT_LT(max_diff(first, expected_vector(*r, other, model::Pooling::kMean)), 1e-5);
  EXPECT_GT(max_diff(first, want), 1e-3);  // different inputs, different vectors
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens.size() + other.size());

  // Array of strings.
  res = c.post("/v1/embeddings", {{"input", {"x y z", text}}});
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_LT(max_diff(floats(res.json()["data"][1]["embedding"]), want), 1e-6);

  // base64: the same floats, little-endian.
  res = c.post("/v1/embeddings", {{"input", text}, {"encoding_format", "base64"}});
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(res.json()["data"][0]["embedding"], base64_floats(got));

  // dimensions: the first k components, renormalized.
  res = c.post("/v1/embeddings", {{"input", text}, {"dimensions", 16}});
  ASSERT_EQ(res.status, 200) << res.body;
  std::vector<float> cut(want.begin(), want.begin() + 16);
  model::l2_normalize(cut);
  EXPECT_LT(max_diff(floats(res.json()["data"][0]["embedding"]), cut), 1e-6);
  res = c.post("/v1/embeddings", {{"input", text}, {"dimensions", d}});
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_LT(max_diff(floats(res.json()["data"][0]["embedding"]), want), 1e-6);
  expect_error(c.post("/v1/embeddings", {{"input", text}, {"dimensions", d + 1}}), 400,
               "dimensions");

  // Generation still works on a model served with a pooling type.
  res = c.post("/v1/completions", {{"prompt", "a"}, {"max_tokens", 2}});
  EXPECT_EQ(res.status, 200) << res.body;
}

// The engine thread makes the reply; no I/O thread waits for it. With one I/O thread and the
// engine held busy by a task, an embeddings request queued behind it must not stop /health from
// answering (before the reply was deferred, the I/O thread blocked until the engine answered).
TEST(EmbeddingsServer, ComputedWithoutHoldingAnIoThread) {
  testing::Options o;
  o.pooling = "mean";
  o.io_threads = 1;
  auto r = testing::start(o);
  ASSERT_NE(r, nullptr);
  EngineBridge& bridge = *r->server->context().bridge;
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  ASSERT_EQ(bridge.run_task([&entered, released](bool) {
              entered.set_value();
              released.wait();
            }),
            SubmitStatus::kOk);
  entered.get_future().wait();
  auto embedding = std::async(std::launch::async, [&] {
    return testing::post(r->port, "/v1/embeddings", {{"input", "hello"}});
  });
  // The request is queued behind the task once the bridge counts two in flight (the client's
  // thread, connection and request: slow under ASan on a loaded machine, hence 60 s).
  const auto queued_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (bridge.in_flight() < 2 && std::chrono::steady_clock::now() < queued_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(bridge.in_flight(), 2);
  auto health = std::async(std::launch::async, [&] { return testing::get(r->port, "/health"); });
  // A blocked I/O thread would not answer until the task is released below: 60 s only bounds a
  // loaded machine's delay.
  const bool answered = health.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  release.set_value();  // whatever happened, let both finish
  EXPECT_TRUE(answered) << "/health waited for the engine";
  EXPECT_EQ(health.get().status, 200);
  const testing::Response res = embedding.get();
  EXPECT_EQ(res.status, 200) << res.body;
  // The wait's drain count is given back once the reply is written.
  auto& open = r->server->context().open_generations;
  const auto given_back_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (open.load() != 0 && std::chrono::steady_clock::now() < given_back_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(open.load(), 0);
}

TEST(EmbeddingsServer, LastTokenPooling) {
  testing::Options o;
  o.pooling = "last";
  auto r = testing::start(o);
  ASSERT_NE(r, nullptr);
  const std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6};
  auto res = testing::post(r->port, "/v1/embeddings", {{"input", tokens}});
  ASSERT_EQ(res.status, 200) << res.body;
  const std::vector<float> got = floats(res.json()["data"][0]["embedding"]);
  EXPECT_LT(max_diff(got, expected_vector(*r, tokens, model::Pooling::kLast)), 1e-5);
  EXPECT_GT(max_diff(got, expected_vector(*r, tokens, model::Pooling::kMean)), 1e-3);
}

TEST(EmbeddingsServer, MalformedBodiesAre400) {
  testing::Options o;
  o.pooling = "mean";
  auto r = testing::start(o);
  ASSERT_NE(r, nullptr);
  Client c(r->port);
  const int32_t vocab = r->tokenizer->n_vocab();
  const json bad_inputs[] = {
      json::object(),                           // no input
      {{"input", 5}},                           // a number
      {{"input", json::array()}},               // empty
      {{"input", json::array({json::array()})}},  // an empty token list
      {{"input", {1, -2}}},                     // negative id
      {{"input", {1, 2.5}}},                    // not an integer
      {{"input", {"a", 3}}},                    // mixed
      {{"input", {json::object()}}},            // object
      {{"input", ""}},                          // empty string
      {{"input", {1, vocab}}},                  // outside the vocabulary
      {{"input", json::array({json::array({1, 4294967296LL})})}},  // beyond int32
  };
  for (const json& b : bad_inputs) expect_error(c.post("/v1/embeddings", b), 400, "input");
  expect_error(c.post("/v1/embeddings", {{"input", "a"}, {"encoding_format", "hex"}}), 400,
               "encoding_format");
  for (const json& dim : {json(0), json(-3), json("8"), json(1.5)})
    expect_error(c.post("/v1/embeddings", {{"input", "a"}, {"dimensions", dim}}), 400,
                 "dimensions");
  expect_error(c.post("/v1/embeddings", {{"input", "a"}, {"model", 3}}), 400, "model");
  expect_error(c.post("/v1/embeddings", {{"input", "a"}, {"model", "other"}}), 404, "");
  auto res = c.request("POST", "/v1/embeddings", "{not json");
  expect_error(res, 400, "");
  res = c.request("GET", "/v1/embeddings");
  EXPECT_EQ(res.status, 405);
  // Too long for the server's context.
  std::vector<int32_t> longer(static_cast<size_t>(1025), 1);
  expect_error(c.post("/v1/embeddings", {{"input", longer}}), 400, "input");
  // Too many inputs.
  json many = json::array();
  for (size_t i = 0; i <= kMaxEmbeddingInputs; ++i) many.push_back("a");
  expect_error(c.post("/v1/embeddings", {{"input", many}}), 400, "input");
  // The server still answers afterwards.
  EXPECT_EQ(c.post("/v1/embeddings", {{"input", "ok"}}).status, 200);
}

TEST(EmbeddingsServer, ModelWithoutPoolingIs400) {
  auto r = testing::start();  // the tiny chat model names no pooling type
  ASSERT_NE(r, nullptr);
  auto res = testing::post(r->port, "/v1/embeddings", {{"input", "hello"}});
  expect_error(res, 400, "model");
  EXPECT_NE(res.json()["error"]["message"].get<std::string>().find("--pooling"), std::string::npos);
  expect_error(testing::post(r->port, "/v1/rerank", {{"query", "q"}, {"documents", {"d"}}}), 400,
               "model");
}

TEST(EmbeddingsServer, AuthAndDrain) {
  testing::Options o;
  o.pooling = "mean";
  o.keys = {"secret"};
  auto r = testing::start(o);
  ASSERT_NE(r, nullptr);
  expect_error(testing::post(r->port, "/v1/embeddings", {{"input", "a"}}), 401, "");
  auto ok = testing::post(r->port, "/v1/embeddings", {{"input", "a"}},
                          {{"Authorization", "Bearer secret"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  Client c(r->port);  // connected before the drain closes the listener
  ASSERT_TRUE(c.connected());
  r->server->request_drain();
  auto res = c.post("/v1/embeddings", {{"input", "a"}}, {{"Authorization", "Bearer secret"}});
  if (res.ok) expect_error(res, 503, "");
  r->server->wait();
}

TEST(EmbeddingsServer, RerankNeedsYesNoTokensAndRankPooling) {
  testing::Options o;
  o.pooling = "rank";
  auto r = testing::start(o);
  ASSERT_NE(r, nullptr);
  // The built-in byte-level vocabulary has no "yes"/"no" tokens.
  auto res = testing::post(r->port, "/v1/rerank", {{"query", "q"}, {"documents", {"d"}}});
  expect_error(res, 400, "model");
  // A reranker does not embed.
  expect_error(testing::post(r->port, "/v1/embeddings", {{"input", "a"}}), 400, "model");
  Client c(r->port);
  const json bad[] = {
      {{"documents", {"d"}}},
      {{"query", ""}, {"documents", {"d"}}},
      {{"query", "q"}},
      {{"query", "q"}, {"documents", json::array()}},
      {{"query", "q"}, {"documents", {1}}},
      {{"query", "q"}, {"documents", {{{"txt", "d"}}}}},
      {{"query", "q"}, {"documents", {"d"}}, {"top_n", 0}},
      {{"query", "q"}, {"documents", {"d"}}, {"return_documents", "yes"}},
  };
  for (const json& b : bad) expect_error(c.post("/v1/rerank", b), 400, "");
}

// Qwen3-Reranker style on a model with a real Qwen vocabulary ("yes" and "no" are tokens).
TEST(EmbeddingsServer, RerankScoresAreYesNoProbabilities) {
  CADENZA_REQUIRE_SHARED();
  const std::string path = (test::shared_dir() / "models" / "tiny-qwen3-f16.gguf").string();
  testing::Options o;
  o.model_path = path;
  o.pooling = "rank";
  o.max_model_len = 512;
  auto r = testing::start(o);
  ASSERT_NE(r, nullptr);
  const std::vector<std::string> docs = {"The capital of France is Paris.", "Bananas are yellow.",
                                         "Paris is in France."};
  auto res = testing::post(r->port, "/v1/rerank",
                           {{"query", "capital of France"},
                            {"documents", {docs[0], {{"text", docs[1]}}, docs[2]}},
                            {"return_documents", true}});
  ASSERT_EQ(res.status, 200) << res.body;
  const json j = res.json();
  ASSERT_EQ(j["results"].size(), 3u);

  // Each score against the model's own logits on the prompt, computed here.
  auto backend = kernels::make_cpu_backend({.n_threads = 1});
  auto m = model::Model::open(path, *backend);
  ASSERT_TRUE(m);
  auto s = model::Session::create(**m, {.max_tokens = 512, .max_batch_tokens = 64});
  ASSERT_TRUE(s);
  const int32_t yes = *r->tokenizer->find_token("yes"), no = *r->tokenizer->find_token("no");
  double prev = 2;
  int64_t prompt_tokens = 0;
  for (const json& item : j["results"]) {
    const size_t i = item["index"];
    ASSERT_LT(i, docs.size());
    EXPECT_EQ(item["document"]["text"], docs[i]);
    (*s)->reset();
    const auto tokens =
        r->tokenizer->encode(reranker_prompt("", "capital of France", docs[i]), false, true);
    prompt_tokens += static_cast<int64_t>(tokens.size());
    auto logits = (*s)->eval(tokens);
    ASSERT_TRUE(logits);
    const double want = 1 / (1 + std::exp(-(static_cast<double>((*logits)[yes]) - (*logits)[no])));
    const double got = item["relevance_score"];
    EXPECT_NEAR(got, want, 1e-5);
    EXPECT_LE(got, prev);  // sorted, best first
    prev = got;
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt_tokens);
  // top_n and no documents by default.
  res = testing::post(r->port, "/v1/rerank",
                      {{"query", "capital of France"}, {"documents", docs}, {"top_n", 1}});
  ASSERT_EQ(res.status, 200) << res.body;
  ASSERT_EQ(res.json()["results"].size(), 1u);
  EXPECT_EQ(res.json()["results"][0]["index"], j["results"][0]["index"]);
  EXPECT_FALSE(res.json()["results"][0].contains("document"));
}

// The queue limit and shutdown of engine tasks (EngineBridge::run_task), on a bridge without an
// engine (an encoder's): it runs one task at a time (max_num_seqs 1) plus max_queue waiting.
TEST(EngineTasks, QueueLimitAndShutdown) {
  auto file = gguf::GgufFile::open(testing::model_path());
  ASSERT_TRUE(file);
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok);
  Metrics metrics;
  BridgeConfig config;
  config.max_queue = 1;
  EngineBridge bridge(nullptr, **tok, metrics, config);
  bridge.start();
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0}, refused{0};
  auto blocking = [&, released](bool run) {
    if (run) {
      released.wait();
      ++ran;
    } else {
      ++refused;
    }
  };
  EXPECT_EQ(bridge.run_task(blocking), SubmitStatus::kOk);  // runs, and blocks the engine thread
  EXPECT_EQ(bridge.run_task(blocking), SubmitStatus::kOk);  // waits (max_queue 1)
  EXPECT_EQ(bridge.run_task(blocking), SubmitStatus::kQueueFull);
  EXPECT_EQ(bridge.in_flight(), 2);
  release.set_value();
  EXPECT_TRUE(bridge.wait_idle(std::chrono::seconds(30)));
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(refused.load(), 0);
  bridge.stop_accepting();  // a drain: nothing new
  EXPECT_EQ(bridge.run_task(blocking), SubmitStatus::kNotAccepting);
  bridge.shutdown();
  EXPECT_EQ(bridge.in_flight(), 0);
}

// ---- an encoder model (bert) served without an engine ----

std::string tiny_bert(const test::TempDir& dir, int64_t pooling, int64_t classes) {
  synth::SynthOptions o;
  o.shape = *synth::find_preset("bge-small-en-v1.5");
  o.shape.n_vocab = 200;
  o.shape.n_ctx = 64;
  o.shape.n_embd = 64;
  o.shape.n_layer = 2;
  o.shape.n_head = 4;
  o.shape.n_head_kv = 4;
  o.shape.head_dim = 16;
  o.shape.n_ff = 128;
  o.shape.pooling_type = pooling;
  o.shape.n_cls_out = classes;
  o.weight_type = "f32";
  o.seed = 3;
  const std::string path = (dir.path() / "bert.gguf").string();
  auto w = synth::write_synthetic_model(o, path);
  EXPECT_TRUE(w) << (w ? "" : w.error());
  return path;
}

TEST(EncoderServer, EmbeddingsMatchTheEncoderAndGenerationIs400) {
  test::TempDir dir("encoder-server");
  testing::Options o;
  o.model_path = tiny_bert(dir, 2, 0);
  o.max_model_len = 64;
  auto r = testing::start_encoder(o);
  ASSERT_NE(r, nullptr);
  Client c(r->port);
  const std::vector<std::string> texts = {"hello world", "paris is the capital of france", "a"};
  auto res = c.post("/v1/embeddings", {{"input", texts}});
  ASSERT_EQ(res.status, 200) << res.body;
  const json j = res.json();
  ASSERT_EQ(j["data"].size(), texts.size());
  // No request is in flight now: the test may use the encoder itself.
  int64_t n_tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto tokens = r->tokenizer->encode(texts[i], true, false);
    EXPECT_EQ(tokens.front(), 2);  // [CLS]
    EXPECT_EQ(tokens.back(), 3);   // [SEP]
    n_tokens += static_cast<int64_t>(tokens.size());
    const std::vector<model::EncoderInput> in = {{tokens}};
    auto want = r->encoder->embed(in);
    ASSERT_TRUE(want) << want.error();
    EXPECT_LT(max_diff(floats(j["data"][i]["embedding"]), (*want)[0]), 1e-6);
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], n_tokens);
  expect_error(c.post("/v1/embeddings", {{"input", std::vector<int32_t>(65, 5)}}), 400, "input");
  expect_error(c.post("/v1/embeddings", {{"input", {1, 200}}}), 400, "input");
  // An encoder does not generate, and this one has no classification head.
  expect_error(c.post("/v1/chat/completions",
                      {{"messages", {{{"role", "user"}, {"content", "hi"}}}}}), 400, "model");
  expect_error(c.post("/v1/completions", {{"prompt", "hi"}}), 400, "model");
  expect_error(c.post("/v1/rerank", {{"query", "q"}, {"documents", {"d"}}}), 400, "model");
  EXPECT_EQ(c.post("/tokenize", {{"prompt", "hello"}}).status, 200);
  EXPECT_EQ(c.get("/v1/models").status, 200);
}

TEST(EncoderServer, CrossEncoderRerank) {
  test::TempDir dir("encoder-server");
  testing::Options o;
  o.model_path = tiny_bert(dir, 4, 1);
  o.max_model_len = 64;
  auto r = testing::start_encoder(o);
  ASSERT_NE(r, nullptr);
  const std::vector<std::string> docs = {"paris is in france", "bananas are yellow",
                                         "the capital of france is paris"};
  auto res = testing::post(r->port, "/v1/rerank",
                           {{"query", "capital of france"}, {"documents", docs}, {"top_n", 2},
                            {"return_documents", true}});
  ASSERT_EQ(res.status, 200) << res.body;
  const json j = res.json();
  ASSERT_EQ(j["results"].size(), 2u);
  // Every pair by hand: [CLS] query [SEP] document [SEP], types 0 then 1, sigmoid(class 0).
  std::vector<double> want;
  for (const std::string& d : docs) {
    std::vector<int32_t> tokens = {2}, types;
    for (int32_t t : r->tokenizer->encode("capital of france", false, false)) tokens.push_back(t);
    tokens.push_back(3);
    types.assign(tokens.size(), 0);
    for (int32_t t : r->tokenizer->encode(d, false, false)) tokens.push_back(t);
    tokens.push_back(3);
    types.resize(tokens.size(), 1);
    const std::vector<model::EncoderInput> in = {{tokens, types}};
    auto logits = r->encoder->classify(in);
    ASSERT_TRUE(logits) << logits.error();
    want.push_back(1 / (1 + std::exp(-static_cast<double>((*logits)[0][0]))));
  }
  std::vector<size_t> order = {0, 1, 2};
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return want[a] > want[b]; });
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(j["results"][k]["index"], order[k]);
    EXPECT_NEAR(j["results"][k]["relevance_score"].get<double>(), want[order[k]], 1e-6);
    EXPECT_EQ(j["results"][k]["document"]["text"], docs[order[k]]);
  }
  expect_error(testing::post(r->port, "/v1/embeddings", {{"input", "a"}}), 400, "model");
}

}  // namespace
}  // namespace cadenza::server
