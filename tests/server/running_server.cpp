#include "running_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "engine/engine_core.h"
#include "kernels/cpu/cpu_backend.h"
#include "server/chat_template.h"
#include "synth/synth.h"
#include "test_models.h"

namespace cadenza::server::testing {
namespace {

// The model file lives for the whole process (removed at exit).
struct RemoveAtExit {
  std::string path;
  ~RemoveAtExit() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove(path, ec);
  }
};

// The server options a test asked for (any free port), for decoder and encoder models alike.
ServerConfig server_config(const Options& o) {
  ServerConfig sc;
  sc.port = 0;
  sc.model_name = o.model_name;
  sc.io_threads = o.io_threads;
  sc.pooling = o.pooling;
  sc.api_keys = o.keys;
  sc.webui = o.webui;
  sc.max_queue = o.max_queue;
  sc.priority_scheduling = o.priority_scheduling;
  sc.max_body_bytes = o.max_body_bytes;
  sc.drain_timeout_s = o.drain_timeout_s;
  sc.request_timeout_s = o.request_timeout_s;
  sc.ttft_slo_factor = o.ttft_slo_factor;
  sc.responses_store = o.responses_store;
  sc.ssl_certfile = o.ssl_certfile;
  sc.ssl_keyfile = o.ssl_keyfile;
  sc.vision = o.vision;
  return sc;
}

}  // namespace

std::string slow_model_path() {
  static RemoveAtExit remover;
  static const std::string path = [] {
    synth::SynthOptions opts = test::tiny_model_options(11);
    opts.shape.n_embd = 512;
    opts.shape.n_layer = 4;
    opts.shape.n_head = 8;
    opts.shape.n_head_kv = 4;
    opts.shape.head_dim = 64;
    opts.shape.n_ff = 1536;
    opts.shape.n_ctx = kSlowModelLen;
    opts.weight_type = "q8_0";
    remover.path = test::write_temp_model(opts, "slow-model");
    return remover.path;
  }();
  return path;
}

std::string model_path() {
  static RemoveAtExit remover;
  static const std::string path = [] {
    synth::SynthOptions opts = test::tiny_model_options(5);
    opts.shape.n_ctx = 2048;
    remover.path = test::write_temp_model(opts, "server-test");
    return remover.path;
  }();
  return path;
}

Result<std::unique_ptr<Running>> build(const Options& o) {
  auto r = std::make_unique<Running>();
  r->backend = kernels::make_cpu_backend({.n_threads = 2});
  auto m = model::Model::open(o.model_path.empty() ? model_path() : o.model_path, *r->backend);
  if (!m) return m.error_value();
  r->model = std::move(*m);
  auto t = Tokenizer::from_gguf(r->model->file());
  if (!t) return t.error_value();
  r->tokenizer = std::move(*t);
  engine::EngineConfig ec;
  ec.max_model_len = o.max_model_len;
  ec.max_num_seqs = o.max_num_seqs;
  ec.num_kv_blocks = o.num_kv_blocks;
  ec.kv_tiers = o.kv_tiers;
  ec.max_num_batched_tokens = o.max_num_batched_tokens;
  auto engine = engine::EngineCore::create(*r->model, *r->tokenizer, ec);
  if (!engine) return engine.error_value();
  auto chat = ChatRenderer::create(r->model->file(), *r->tokenizer, o.chat_template);
  if (!chat) return chat.error_value();
  const ServerConfig sc = server_config(o);
  auto s = Server::create(sc, *r->tokenizer, std::move(*engine), std::move(*chat));
  if (!s) return s.error_value();
  r->server = std::move(*s);
  return r;
}

namespace {

Result<std::unique_ptr<Running>> build_encoder(const Options& o) {
  auto r = std::make_unique<Running>();
  r->backend = kernels::make_cpu_backend({.n_threads = 2});
  auto e = model::Encoder::open(o.model_path, *r->backend);
  if (!e) return e.error_value();
  r->encoder = std::move(*e);
  auto t = Tokenizer::from_gguf(r->encoder->file());
  if (!t) return t.error_value();
  r->tokenizer = std::move(*t);
  auto chat = ChatRenderer::create(r->encoder->file(), *r->tokenizer, "");
  if (!chat) return chat.error_value();
  const ServerConfig sc = server_config(o);
  auto embedder = make_encoder_embedder(
      *r->encoder, {.max_tokens = o.max_model_len, .max_batch_tokens = 256});
  auto s = Server::create(sc, *r->tokenizer, nullptr, std::move(*chat), std::move(embedder));
  if (!s) return s.error_value();
  r->server = std::move(*s);
  return r;
}

std::unique_ptr<Running> start_built(Result<std::unique_ptr<Running>> built) {
  EXPECT_TRUE(built.ok()) << built.error();
  if (!built) return nullptr;
  std::unique_ptr<Running> r = std::move(*built);
  auto st = r->server->start();
  EXPECT_TRUE(st.ok()) << st.error();
  if (!st) return nullptr;
  r->port = r->server->port();
  // The engine warms up (and calibrates the TTFT estimate) before it is ready: seconds under ASan
  // on a loaded machine, so a generous deadline; a server that never gets ready fails the test
  // here rather than in its first request.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!r->server->ready() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(r->server->ready()) << "the server was not ready within 60 s";
  if (!r->server->ready()) return nullptr;
  return r;
}

}  // namespace

std::unique_ptr<Running> start(const Options& o) { return start_built(build(o)); }

std::unique_ptr<Running> start_encoder(const Options& o) { return start_built(build_encoder(o)); }

}  // namespace cadenza::server::testing
