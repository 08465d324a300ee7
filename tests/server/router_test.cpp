// Router mode (server/model_pool.h, docs/server.md "Several models"): three synthesized tiny
// models in a folder, loaded on demand, at most N at once, unloaded by LRU, memory or idle time;
// a slow load does not stall another model's stream; failed loads answer and are retried.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <regex>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "engine/engine_core.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "server/model_catalog.h"
#include "server/server.h"
#include "synth/synth.h"
#include "temp_dir.h"
#include "test_client.h"
#include "test_models.h"

namespace cadenza::server {
namespace {

using nlohmann::json;
using testing::get;
using testing::post;
using Clock = std::chrono::steady_clock;

void write_model(const std::string& path, uint64_t seed) {
  synth::SynthOptions opts = test::tiny_model_options(seed);
  opts.shape.n_ctx = 2048;
  auto written = synth::write_synthetic_model(opts, path);
  ASSERT_TRUE(written.ok()) << written.error();
}

// The loader `cadenza serve` uses, reduced to what the tests need (its own CPU backend per model).
Result<ModelParts> load_tiny(const ModelSpec& spec) {
  struct Owned {
    std::unique_ptr<kernels::Backend> backend;
    std::unique_ptr<model::Model> model;
  };
  auto owned = std::make_shared<Owned>();
  owned->backend = kernels::make_cpu_backend({.n_threads = 1});
  auto m = model::Model::open(spec.path, *owned->backend);
  if (!m) return m.error_value();
  owned->model = std::move(*m);
  auto t = Tokenizer::from_gguf(owned->model->file());
  if (!t) return t.error_value();
  engine::EngineConfig ec;
  ec.max_model_len = 1024;
  ec.max_num_seqs = 4;
  auto engine = engine::EngineCore::create(*owned->model, **t, ec);
  if (!engine) return engine.error_value();
  auto chat = ChatRenderer::create(owned->model->file(), **t, "");
  if (!chat) return chat.error_value();
  ModelParts parts;
  parts.memory_bytes = std::filesystem::file_size(spec.path) + (1u << 20);
  parts.tokenizer = std::move(*t);
  parts.engine = std::move(*engine);
  parts.chat = std::move(*chat);
  parts.model = std::shared_ptr<void>(owned, owned->model.get());
  parts.keep = owned;
  return parts;
}

// Three models "a", "b", "c" (different seeds) in a fresh folder.
class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) write_model(dir_.file(std::string(1, char('a' + i)) + ".gguf"), 11 + i);
  }

  std::unique_ptr<Server> start(RouterConfig rc, int io_threads = 2) {
    auto catalog = build_catalog(dir_.path().string(), {});
    EXPECT_TRUE(catalog.ok()) << catalog.error();
    if (!catalog) return nullptr;
    ServerConfig sc;
    sc.port = 0;
    sc.max_queue = 16;
    sc.io_threads = io_threads;
    sc.max_body_bytes = 64 * 1024;
    auto s = Server::create_router(sc, std::move(*catalog), load_tiny, rc);
    EXPECT_TRUE(s.ok()) << s.error();
    if (!s) return nullptr;
    auto st = (*s)->start();
    EXPECT_TRUE(st.ok()) << st.error();
    if (!st) return nullptr;
    return std::move(*s);
  }

  test::TempDir dir_{"router-test"};
};

json completion(const std::string& model, int max_tokens = 4) {
  return {{"model", model},     {"prompt", "hello"},  {"max_tokens", max_tokens},
          {"temperature", 0}, {"ignore_eos", true}};
}

// Model name -> status, from GET /v1/models.
std::map<std::string, std::string> statuses(uint16_t port) {
  std::map<std::string, std::string> out;
  const json j = get(port, "/v1/models").json();
  if (!j.contains("data")) return out;
  for (const json& m : j.at("data")) out[m.at("id").get<std::string>()] = m.value("status", "");
  return out;
}

int loaded_count(const std::map<std::string, std::string>& s) {
  return static_cast<int>(std::count_if(s.begin(), s.end(),
                                        [](const auto& kv) { return kv.second == "loaded"; }));
}

// The value of one sample (exact name with labels) in Prometheus text; -1 when absent.
double sample(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

TEST(ModelCatalog, NamesFollowTheRule) {
  test::TempDir d("catalog-test");
  std::filesystem::create_directories(d.path() / "family");
  std::filesystem::create_directories(d.path() / ".cache");
  for (const char* f : {"one.gguf", "family/two.GGUF", ".hidden.gguf", ".cache/three.gguf",
                        "notes.txt", "solo.gguf.part"})
    std::ofstream(d.file(f)) << "x";
  auto c = build_catalog(d.path().string(), {"named=" + d.file("one.gguf")});
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_EQ(c->size(), 3u);
  EXPECT_EQ((*c)[0].name, "named");
  EXPECT_EQ((*c)[0].path, d.file("one.gguf"));
  EXPECT_EQ((*c)[1].name, "family/two");
  EXPECT_EQ((*c)[2].name, "one");
  // -m FILE: the stem; duplicates name both files.
  auto dup = build_catalog(d.path().string(), {d.file("one.gguf")});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().find("two models are named 'one'"), std::string::npos) << dup.error();
  EXPECT_FALSE(build_catalog(d.file("missing"), {}).ok());
  EXPECT_FALSE(build_catalog("", {d.file("absent.gguf")}).ok());
  EXPECT_FALSE(build_catalog("", {"=" + d.file("one.gguf")}).ok());
  test::TempDir empty("catalog-empty");
  auto none = build_catalog(empty.path().string(), {});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("no .gguf files"), std::string::npos);
}

TEST_F(RouterTest, ListsEveryModelAndRefusesUnknownOnes) {
  auto s = start({.max_loaded = 2});
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->ready());  // router mode is ready before any model loads
  EXPECT_EQ(get(s->port(), "/ready").status, 200);
  auto st = statuses(s->port());
  EXPECT_EQ(st, (std::map<std::string, std::string>{
                    {"a", "unloaded"}, {"b", "unloaded"}, {"c", "unloaded"}}));
  auto r = post(s->port(), "/v1/completions", completion("nope"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["error"]["code"], "model_not_found");
  EXPECT_EQ(r.json()["error"]["type"], "invalid_request_error");
  r = post(s->port(), "/v1/completions", {{"prompt", "hi"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "model");
  // Nothing was loaded by those.
  EXPECT_EQ(loaded_count(statuses(s->port())), 0);
  // /tokenize names its model too (and loads it).
  r = post(s->port(), "/tokenize", {{"model", "b"}, {"prompt", "hello"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_GT(r.json()["count"].get<int>(), 0);
  EXPECT_EQ(statuses(s->port())["b"], "loaded");
}

TEST_F(RouterTest, RotationKeepsAtMostTwoLoaded) {
  auto s = start({.max_loaded = 2});
  ASSERT_TRUE(s);
  const uint16_t port = s->port();
  // A watcher samples /v1/models all along: at no time are more than two loaded.
  std::atomic<bool> done{false};
  std::atomic<int> max_seen{0}, samples{0};
  std::thread watcher([&] {
    while (!done.load()) {
      const int n = loaded_count(statuses(port));
      max_seen.store(std::max(max_seen.load(), n));
      samples.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  for (int round = 0; round < 4; ++round) {
    for (const char* name : {"a", "b", "c"}) {
      auto r = post(port, "/v1/chat/completions",
                    {{"model", name},
                     {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                     {"max_tokens", 3},
                     {"ignore_eos", true}});
      ASSERT_EQ(r.status, 200) << name << ": " << r.body;
      EXPECT_EQ(r.json()["model"], name);
      auto st = statuses(port);
      EXPECT_EQ(st[name], "loaded");
      EXPECT_LE(loaded_count(st), 2);
    }
  }
  done.store(true);
  watcher.join();
  EXPECT_GT(samples.load(), 0);
  EXPECT_LE(max_seen.load(), 2);
  EXPECT_EQ(max_seen.load(), 2);
  const std::string m = get(port, "/metrics").body;
  EXPECT_EQ(sample(m, "cadenza_models_loaded"), 2);
  // Each round loads every model again (the third evicts the least recently used).
  EXPECT_EQ(sample(m, "cadenza_model_loads_total{model=\"a\",result=\"ok\"}"), 4);
  EXPECT_GE(sample(m, "cadenza_model_unloads_total{model=\"a\",reason=\"lru\"}"), 3);
  // Per-model series carry the model label.
  EXPECT_EQ(sample(m, "cadenza_request_success_total{model=\"b\",finished_reason=\"length\"}"), 4);
  EXPECT_EQ(sample(m, "cadenza_generation_tokens_total{model=\"c\"}"), 12);
  EXPECT_NE(m.find("cadenza_num_requests_running{model=\""), std::string::npos);
}

TEST_F(RouterTest, WaitersShareOneLoad) {
  auto s = start({.max_loaded = 1});
  ASSERT_TRUE(s);
  std::vector<std::future<testing::Response>> rs;
  for (int i = 0; i < 4; ++i)
    rs.push_back(std::async(std::launch::async,
                            [&] { return post(s->port(), "/v1/completions", completion("c")); }));
  for (auto& f : rs) {
    auto r = f.get();
    EXPECT_EQ(r.status, 200) << r.body;
  }
  const std::string m = get(s->port(), "/metrics").body;
  EXPECT_EQ(sample(m, "cadenza_model_loads_total{model=\"c\",result=\"ok\"}"), 1);
}

// Reads one SSE response on its own connection, timing each read that carries data. When
// `first_chunk` is given it is set once the first data chunk has arrived, so a caller knows the
// request is running (the running-requests gauge can still show the previous request).
struct StreamTimes {
  int status = 0;
  bool done = false;  // saw [DONE]
  std::string body;
  std::vector<Clock::time_point> chunks;
};

StreamTimes stream(uint16_t port, const json& body, std::promise<void>* first_chunk = nullptr) {
  namespace net = boost::asio;
  StreamTimes out;
  net::io_context ioc;
  net::ip::tcp::socket sock(ioc);
  boost::system::error_code ec;
  sock.connect({net::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) return out;
  const std::string b = body.dump();
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                          "Content-Type: application/json\r\nContent-Length: " +
                          std::to_string(b.size()) + "\r\n\r\n" + b;
  net::write(sock, net::buffer(req), ec);
  char buf[4096];
  while (!ec) {
    const size_t n = sock.read_some(net::buffer(buf), ec);
    if (n == 0) continue;
    out.body.append(buf, n);
    if (std::string_view(buf, n).find("data:") != std::string_view::npos) {
      out.chunks.push_back(Clock::now());
      if (first_chunk != nullptr && out.chunks.size() == 1) first_chunk->set_value();
    }
  }
  if (first_chunk != nullptr && out.chunks.empty()) first_chunk->set_value();
  if (out.body.rfind("HTTP/1.1 ", 0) == 0) out.status = std::stoi(out.body.substr(9, 3));
  out.done = out.body.find("data: [DONE]") != std::string::npos;
  return out;
}

TEST_F(RouterTest, SlowLoadDoesNotStallAnotherModelsStream) {
  constexpr auto kDelay = std::chrono::milliseconds(3000);
  // One I/O thread: a load that blocked it (or a's engine thread) would stall a's streams.
  auto s = start({.max_loaded = 3, .slow_load_model = "c", .slow_load_delay = kDelay}, 1);
  ASSERT_TRUE(s);
  const uint16_t port = s->port();
  ASSERT_EQ(post(port, "/v1/completions", completion("a")).status, 200);  // a is loaded
  // a streams, one request after another, from before c is asked for until after c is loaded.
  // The timeline holds each request's send time and each data chunk's arrival.
  std::vector<Clock::time_point> timeline;
  std::atomic<int> streams{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> stream_failed{false};
  std::thread streamer([&] {
    while (!stop.load()) {
      timeline.push_back(Clock::now());
      StreamTimes t = stream(port, {{"model", "a"}, {"prompt", "x"}, {"max_tokens", 64},
                                    {"ignore_eos", true}, {"stream", true}});
      if (t.status != 200 || !t.done) stream_failed.store(true);
      timeline.insert(timeline.end(), t.chunks.begin(), t.chunks.end());
      streams.fetch_add(1);
    }
  });
  while (streams.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // c's load: 3 s asleep on the loader thread (the test hook), then the real load.
  const int before = streams.load();
  const auto load_start = Clock::now();
  auto r = post(port, "/v1/completions", completion("c"));
  const auto loaded_at = Clock::now();
  const int during = streams.load() - before;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop.store(true);
  streamer.join();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(stream_failed.load());
  EXPECT_GE(loaded_at - load_start, kDelay);  // the hook really slowed c's load
  EXPECT_GE(during, 2);                       // a kept serving during it
  // The largest gap between consecutive events of a's timeline that overlaps the load.
  std::chrono::milliseconds worst{0};
  for (size_t i = 1; i < timeline.size(); ++i)
    if (timeline[i] > load_start && timeline[i - 1] < loaded_at)
      worst = std::max(worst, std::chrono::duration_cast<std::chrono::milliseconds>(
                                  timeline[i] - timeline[i - 1]));
  // A stall would be about the whole delay; generous margin for a loaded CI machine.
  EXPECT_LT(worst, kDelay / 2) << "largest gap between a's chunks during c's load";
  std::printf("router: %d streams of 'a' during the %lld ms load of 'c'; largest gap %lld ms\n",
              during, static_cast<long long>((loaded_at - load_start) / std::chrono::milliseconds(1)),
              static_cast<long long>(worst.count()));
}

TEST_F(RouterTest, UnloadWaitsForRequestsInFlight) {
  // One model at a time: b's load must wait until a's running stream ends, never abort it.
  auto s = start({.max_loaded = 1});
  ASSERT_TRUE(s);
  const uint16_t port = s->port();
  ASSERT_EQ(post(port, "/v1/completions", completion("a")).status, 200);
  // Ask for b only once a's stream has sent its first chunk: then a has a request running.
  std::promise<void> a_running;
  auto a_started = a_running.get_future();
  auto long_stream = std::async(std::launch::async, [&] {
    return stream(port, {{"model", "a"}, {"prompt", "x"}, {"max_tokens", 600},
                         {"ignore_eos", true}, {"stream", true}},
                  &a_running);
  });
  ASSERT_EQ(a_started.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  auto rb = post(port, "/v1/completions", completion("b"));
  EXPECT_EQ(rb.status, 200) << rb.body;
  StreamTimes a = long_stream.get();
  EXPECT_EQ(a.status, 200);
  EXPECT_TRUE(a.done);
  EXPECT_NE(a.body.find("\"finish_reason\":\"length\""), std::string::npos) << a.body.substr(0, 400);
  EXPECT_EQ(a.body.find("\"error\""), std::string::npos);
  auto st = statuses(port);
  EXPECT_EQ(st["a"], "unloaded");
  EXPECT_EQ(st["b"], "loaded");
}

TEST_F(RouterTest, IdleModelsAreUnloaded) {
  auto s = start({.idle_unload_s = 0.3});
  ASSERT_TRUE(s);
  ASSERT_EQ(post(s->port(), "/v1/completions", completion("a")).status, 200);
  // Deadlines far above the 0.3 s idle limit: the unload (an engine thread joined) is slow under
  // ASan on a loaded machine; a model that never unloads still fails, after 60 s.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool unloaded = false;
  while (!(unloaded = statuses(s->port())["a"] == "unloaded") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(unloaded);
  // The status turns "unloaded" when the pool lets the model go; the counter follows once its
  // engine thread is joined.
  double idle_unloads = -1;
  while ((idle_unloads = sample(get(s->port(), "/metrics").body,
                                "cadenza_model_unloads_total{model=\"a\",reason=\"idle\"}")) < 1 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(idle_unloads, 1);
  // And it comes back on demand.
  EXPECT_EQ(post(s->port(), "/v1/completions", completion("a")).status, 200);
}

TEST_F(RouterTest, MemoryBudgetBoundsTheLoadedModels) {
  // load_tiny counts file + 1 MiB per model: a budget of 1.5 models holds one at a time.
  const uint64_t one = std::filesystem::file_size(dir_.file("a.gguf")) + (1u << 20);
  auto s = start({.memory_budget = one + one / 2});
  ASSERT_TRUE(s);
  for (const char* name : {"a", "b", "c", "a"}) {
    auto r = post(s->port(), "/v1/completions", completion(name));
    ASSERT_EQ(r.status, 200) << r.body;
    auto st = statuses(s->port());
    EXPECT_EQ(loaded_count(st), 1);
    EXPECT_EQ(st[name], "loaded");
  }
  const std::string m = get(s->port(), "/metrics").body;
  EXPECT_EQ(sample(m, "cadenza_model_unloads_total{model=\"a\",reason=\"memory\"}"), 1);
  // A budget smaller than one model: its load fails with a clear error.
  s.reset();
  auto small = start({.memory_budget = one / 2});
  ASSERT_TRUE(small);
  auto r = post(small->port(), "/v1/completions", completion("a"));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.json()["error"]["code"], "model_load_failed");
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("--models-memory"),
            std::string::npos);
}

TEST_F(RouterTest, FailedLoadAnswersEveryWaiterAndIsRetried) {
  std::ofstream(dir_.file("broken.gguf")) << "not a gguf file";
  auto s = start({.max_loaded = 2});
  ASSERT_TRUE(s);
  std::vector<std::future<testing::Response>> rs;
  for (int i = 0; i < 3; ++i)
    rs.push_back(std::async(std::launch::async, [&] {
      return post(s->port(), "/v1/completions", completion("broken"));
    }));
  for (auto& f : rs) {
    auto r = f.get();
    EXPECT_EQ(r.status, 500) << r.body;
    EXPECT_EQ(r.json()["error"]["code"], "model_load_failed");
  }
  const json models = get(s->port(), "/v1/models").json();
  bool listed = false;
  for (const json& m : models["data"])
    if (m["id"] == "broken") {
      listed = true;
      EXPECT_EQ(m["status"], "unloaded");
      EXPECT_FALSE(m.value("last_error", "").empty());
    }
  EXPECT_TRUE(listed);
  // A later request tries again (a second load attempt), and the other models are unaffected.
  EXPECT_EQ(post(s->port(), "/v1/completions", completion("broken")).status, 500);
  EXPECT_EQ(post(s->port(), "/v1/completions", completion("a")).status, 200);
  const std::string m = get(s->port(), "/metrics").body;
  const double failed = sample(m, "cadenza_model_loads_total{model=\"broken\",result=\"error\"}");
  EXPECT_GE(failed, 2);
  EXPECT_LE(failed, 4);
}

TEST_F(RouterTest, DrainAnswersRequestsWaitingForALoad) {
  auto s = start({.max_loaded = 2, .slow_load_model = "b",
                  .slow_load_delay = std::chrono::milliseconds(2000)});
  ASSERT_TRUE(s);
  auto waiting = std::async(std::launch::async,
                            [&] { return post(s->port(), "/v1/completions", completion("b")); });
  // Drain only once b's load has begun (the request waits on it): a drain that came first would
  // answer the request 503 without it ever having waited for a load.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (statuses(s->port())["b"] != "loading") {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "b's load never began";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  s->request_drain();
  auto r = waiting.get();
  EXPECT_EQ(r.status, 503) << r.body;
  s->wait();
}

}  // namespace
}  // namespace cadenza::server
