// Server: the OpenAI-compatible HTTP server of one model (`cadenza serve`), or of several loaded
// on demand (router mode: create_router, a ModelPool).
//
//   auto server = Server::create(config, model, tokenizer, std::move(engine), std::move(chat));
//   (an encoder model: no engine, an embedder from make_encoder_embedder: embeddings and rerank
//   only, generation routes answer 400)
//   Status s = (*server)->start();   // binds, starts the I/O threads and the engine thread
//   (*server)->port();               // the bound port (config.port 0: an ephemeral one)
//   (*server)->request_drain();      // from anywhere (SIGTERM handler, tests)
//   (*server)->wait();               // returns once drained and stopped
//
// Threads: `io_threads` threads run one io_context (all connections); one engine thread runs the
// EngineCore (EngineBridge); drain runs on its own thread.
// TLS: create() loads the certificate and key (errors name the option and file).
// Drain: /ready turns 503 and new generations get 503 at once, the listener closes, running
// requests get drain_timeout to finish, then the rest are aborted, then everything stops.
// Ownership: the Server borrows the Model and Tokenizer (they must outlive it) and owns the
// engine, the chat renderer, the metrics and the threads. Thread-safety: request_drain(),
// ready(), port() and context() may be called from any thread; start/wait from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_core.h"
#include "server/chat_template.h"
#include "server/embedder.h"
#include "server/engine_bridge.h"
#include "server/metrics.h"
#include "server/model_pool.h"
#include "server/server_context.h"
#include "server/vision_service.h"
#include "util/result.h"

namespace cadenza::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port (see port())
  int io_threads = 2;
  std::string model_name;
  std::vector<std::string> api_keys;
  int32_t max_queue = 256;
  // > 0: refuse (429) a request whose predicted time to first token exceeds this many times its
  // prediction on an idle server (BridgeConfig::ttft_slo_factor, server/ttft_admission.h).
  double ttft_slo_factor = 0;
  double drain_timeout_s = 30;
  // Seconds a generation may run from its request's arrival before it is aborted (HTTP 504, or
  // an error event mid-stream); 0: no limit (ServerContext::request_timeout_s).
  double request_timeout_s = 0;
  size_t max_body_bytes = size_t{8} << 20;
  // Finished /v1/responses kept for previous_response_id and GET/DELETE (LRU); 0: none.
  size_t responses_store = 0;
  bool warmup = true;
  // The web console (docs/webui.md) at / and /webui/*; false (--no-webui): those answer 404.
  bool webui = true;
  // `--scheduling-policy priority`: honour the requests' `priority` field (vLLM's option);
  // false (fcfs): a request with a non-zero priority is refused with 400.
  bool priority_scheduling = false;
  bool handle_signals = false;  // SIGTERM/SIGINT start a drain
  // TLS (both or neither): PEM certificate chain and unencrypted PEM private key (server/tls.h).
  // Empty: plain HTTP.
  std::string ssl_certfile;
  std::string ssl_keyfile;
  // Mutual TLS: a PEM file of CAs that must have signed every client's certificate (empty: none).
  std::string ssl_ca_certs;
  // A model split across processes (docs/distributed.md): the idle heartbeat and what to do
  // when a rank fails (BridgeConfig::on_fatal; /ready answers 503 from then on).
  // Tool calls and reasoning (docs/structured-output.md): a toolcall format name
  // (toolcall/tool_call.h: hermes, llama3, mistral, ...; "auto": detect from the chat template,
  // Hermes when it shows none) and a reasoning format name (qwen3, deepseek_r1, gpt_oss, none;
  // "auto": detect).
  std::string tool_call_parser = "auto";
  std::string reasoning_parser = "auto";
  // /v1/embeddings and /v1/rerank (docs/server.md): the pooling of the model's hidden states,
  // "mean", "cls", "last", "rank" (a Qwen3-Reranker-style decoder) or "none"; empty: the GGUF's
  // `<arch>.pooling_type` (a model without it cannot embed).
  std::string pooling;
  double heartbeat_interval_s = 2;
  double heartbeat_timeout_s = 10;
  std::function<void(const std::string& why)> on_fatal;
  // Images in chat messages (docs/vision.md): on when vision.mmproj is set (one model only).
  VisionOptions vision;
};

// Router mode (docs/server.md): which models stay loaded.
struct RouterConfig {
  int32_t max_loaded = 0;      // --models-max (0: no limit)
  uint64_t memory_budget = 0;  // --models-memory in bytes (0: none)
  double idle_unload_s = 0;    // --idle-unload (0: never)
  // Test hook (PoolConfig::slow_load_model): the loader sleeps before loading this model.
  std::string slow_load_model{};
  std::chrono::milliseconds slow_load_delay{0};
};

class Server {
 public:
  static Result<std::unique_ptr<Server>> create(const ServerConfig& config,
                                                const Tokenizer& tokenizer,
                                                std::unique_ptr<engine::EngineCore> engine,
                                                std::unique_ptr<ChatRenderer> chat,
                                                std::unique_ptr<Embedder> embedder = nullptr);
  // Router mode: serves every model of `catalog` (distinct names), each loaded by `loader` on
  // the pool's loader thread when a request first names it (server/model_pool.h). The
  // ServerConfig's per-model settings (max_queue, warmup, parsers) apply to each model;
  // model_name is unused. Errors: duplicate names, bad limits, TLS files.
  static Result<std::unique_ptr<Server>> create_router(const ServerConfig& config,
                                                       std::vector<ModelSpec> catalog,
                                                       ModelLoader loader, RouterConfig router);
  ~Server();  // stops everything (no drain)

  Status start();
  uint16_t port() const;
  bool tls() const;  // HTTPS (config.ssl_certfile set)
  bool ready() const;
  // Starts a graceful drain (idempotent, returns at once).
  void request_drain();
  // Blocks until the server has stopped (after a drain).
  void wait();

  ServerContext& context();
  Metrics& metrics();
  ModelPool* pool();  // router mode; null with one model

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  void wait_for_signal();
  std::unique_ptr<Impl> impl_;
};

}  // namespace cadenza::server
