#include "server/server.h"

#include <cmath>

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <condition_variable>
#include <csignal>
#include <optional>

#include "model/pooling.h"
#include "server/embedder.h"
#include "server/http_session.h"
#include "server/tls.h"

namespace cadenza::server {

namespace net = boost::asio;

struct Server::Impl {
  // Declared first so that it is destroyed last. stop() destroys it early, once every thread that
  // could use it has stopped: that destroys the pending handlers, and with them the sessions,
  // which closes their connections.
  std::unique_ptr<net::io_context> ioc;
  ServerConfig config;
  std::unique_ptr<ChatRenderer> chat;
  std::unique_ptr<GrammarCache> grammars;
  std::unique_ptr<ResponseStore> responses;  // --responses-store; null when 0
  Metrics metrics;
  std::unique_ptr<VisionService> vision;  // --mmproj; its workers post to sessions
  std::unique_ptr<Embedder> embedder;  // used on the engine thread only; outlives it
  std::unique_ptr<EngineBridge> bridge;  // one model
  std::unique_ptr<ModelPool> pool;       // router mode (then bridge is null)
  std::unique_ptr<net::ssl::context> tls;  // HTTPS when set
  ServerContext ctx;
  std::shared_ptr<Listener> listener;
  std::unique_ptr<net::signal_set> signals;
  // Keeps run() going while no connection is open (engine outputs may still be posted).
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  uint16_t port = 0;
  std::vector<std::thread> io_threads;
  std::thread drain_thread;
  std::mutex mu;
  std::mutex stop_mu;
  std::condition_variable stopped_cv;
  bool stopped = false;
  std::atomic<bool> drain_started{false};
  bool started = false;

  explicit Impl(int io_threads) : ioc(std::make_unique<net::io_context>(io_threads)) {
    work.emplace(ioc->get_executor());
  }

  // The one model's bridge, or every loaded model of the pool.
  int64_t in_flight() const { return bridge ? bridge->in_flight() : pool->in_flight(); }
  bool wait_idle(std::chrono::milliseconds timeout) {
    return bridge ? bridge->wait_idle(timeout) : pool->wait_idle(timeout);
  }
  void abort_all() {
    if (bridge)
      bridge->abort_all();
    else
      pool->abort_all();
  }

  void drain() {
    spdlog::info("draining: no new requests; {} in flight (timeout {} s)", in_flight(),
                 config.drain_timeout_s);
    if (listener) listener->close();
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(config.drain_timeout_s * 1000));
    if (!wait_idle(timeout)) {
      spdlog::warn("drain timeout: aborting {} requests", in_flight());
      abort_all();
      wait_idle(std::chrono::seconds(10));
    }
    // Let the connections write their last bytes.
    for (int i = 0; i < 200 && ctx.open_generations.load() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stop();
  }

  void stop() {
    std::lock_guard stop_lock(stop_mu);
    if (!ioc) return;
    work.reset();
    ioc->stop();
    for (auto& t : io_threads)
      if (t.joinable()) t.join();
    if (bridge) bridge->shutdown();  // the engine thread may post to the stopped io_context
    if (pool) pool->shutdown();      // the loader thread and every model's engine thread
    if (vision) vision->shutdown();  // its workers may post to the stopped io_context too
    listener.reset();
    signals.reset();
    ioc.reset();  // destroys pending handlers: sessions close their sockets
    std::lock_guard lock(mu);
    stopped = true;
    stopped_cv.notify_all();
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  if (impl_->drain_thread.joinable()) impl_->drain_thread.join();
  if (impl_->started) impl_->stop();
}

Result<std::unique_ptr<Server>> Server::create(const ServerConfig& config,
                                               const Tokenizer& tokenizer,
                                               std::unique_ptr<engine::EngineCore> engine,
                                               std::unique_ptr<ChatRenderer> chat,
                                               std::unique_ptr<Embedder> embedder) {
  if (!engine && !embedder) return Error("a server needs an engine or an embedder");
  if (config.io_threads < 1) return Error("io_threads must be >= 1");
  if (config.max_queue < 0) return Error("--max-queue must be >= 0");
  if (!(config.ttft_slo_factor == 0 || config.ttft_slo_factor >= 1) ||
      !std::isfinite(config.ttft_slo_factor))
    return Error("--ttft-slo-factor must be 0 (off) or a finite number >= 1");
  if (config.max_body_bytes < 1) return Error("--max-body-bytes must be >= 1");
  if (!(config.drain_timeout_s >= 0)) return Error("--drain-timeout must be >= 0");
  if (!(config.request_timeout_s >= 0) || !std::isfinite(config.request_timeout_s))
    return Error("--request-timeout must be a finite number of seconds >= 0 (0: no limit)");
  std::unique_ptr<net::ssl::context> tls;
  if (!config.ssl_ca_certs.empty() && config.ssl_certfile.empty())
    return Error("--ssl-ca-certs needs --ssl-certfile and --ssl-keyfile");
  if (!config.ssl_certfile.empty() || !config.ssl_keyfile.empty()) {
    auto made = make_tls_context(config.ssl_certfile, config.ssl_keyfile, config.ssl_ca_certs);
    if (!made) return made.error_value();
    tls = std::move(*made);
  }
  auto formats =
      resolve_output_formats(config.tool_call_parser, config.reasoning_parser, chat->source());
  if (!formats) return formats.error_value();
  const toolcall::ToolCallFormat tool_format = formats->tools;
  const toolcall::ReasoningFormat reasoning = formats->reasoning;
  spdlog::info("tool calls: {} format; reasoning: {}", toolcall::tool_call_format_name(tool_format),
               toolcall::reasoning_format_name(reasoning));
  auto impl = std::make_unique<Impl>(config.io_threads);
  impl->config = config;
  impl->grammars = std::make_unique<GrammarCache>(grammar::TokenIndex::from_tokenizer(tokenizer));
  impl->tls = std::move(tls);
  impl->chat = std::move(chat);
  const bool generates = engine != nullptr;
  const int32_t max_model_len =
      engine ? engine->config().max_model_len : embedder->options().max_tokens;
  // /v1/embeddings and /v1/rerank: the embedder given (an encoder), else the pooling the GGUF
  // names, or --pooling, over the decoder.
  if (embedder) {
    impl->embedder = std::move(embedder);
    spdlog::info("embeddings: encoder, pooling '{}'",
                 model::pooling_name(impl->embedder->options().pooling));
  } else {
    auto made = decoder_embedder_for(engine->model(), tokenizer, config.pooling, max_model_len);
    if (!made) return made.error_value();
    impl->embedder = std::move(*made);
  }
  if (!config.vision.mmproj.empty()) {
    if (!engine) return Error("--mmproj needs a model that generates text (not an encoder)");
    auto vision = VisionService::create(config.vision, engine->model().config().n_embd, &impl->metrics);
    if (!vision) return vision.error_value();
    // Gemma 3's image tokens attend to each other both ways: each image runs in one step.
    const vision::VisionConfig& vc = (*vision)->config();
    const engine::EngineConfig& ec = engine->config();
    if (vc.bidirectional_image && !engine->model().backend().supports_attention_spans())
      return make_error("--mmproj {}: its images attend to themselves both ways (the {} projector), "
                        "which this backend's attention does not support yet", config.vision.mmproj,
                        vision::projector_name(vc.projector));
    if (vc.bidirectional_image && vc.n_image_tokens > ec.max_num_batched_tokens - ec.max_num_seqs + 1)
      return make_error("--mmproj {}: an image's {} tokens are computed in one step, beside up to "
                        "max_num_seqs - 1 decodes: raise --max-num-batched-tokens ({}) or lower "
                        "--max-num-seqs ({})", config.vision.mmproj, vc.n_image_tokens,
                        ec.max_num_batched_tokens, ec.max_num_seqs);
    impl->vision = std::move(*vision);
  }
  impl->bridge = std::make_unique<EngineBridge>(
      std::move(engine), tokenizer, impl->metrics,
      BridgeConfig{.max_queue = config.max_queue, .warmup = config.warmup,
                   .heartbeat_interval_s = config.heartbeat_interval_s,
                   .heartbeat_timeout_s = config.heartbeat_timeout_s,
                   .on_fatal = config.on_fatal,
                   .ttft_slo_factor = config.ttft_slo_factor});
  ServerContext& ctx = impl->ctx;
  ctx.model_name = config.model_name;
  ctx.created = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  ctx.max_model_len = max_model_len;
  ctx.max_body_bytes = config.max_body_bytes;
  ctx.request_timeout_s = config.request_timeout_s;
  ctx.tokenizer = &tokenizer;
  ctx.chat = impl->chat.get();
  ctx.bridge = impl->bridge.get();
  ctx.embedder = impl->embedder.get();
  ctx.generates = generates;
  ctx.vision = impl->vision.get();
  ctx.metrics = &impl->metrics;
  ctx.keys = ApiKeys(config.api_keys);
  ctx.webui = config.webui;
  ctx.priority_scheduling = config.priority_scheduling;
  ctx.grammars = impl->grammars.get();
  if (config.responses_store > 0) {
    impl->responses = std::make_unique<ResponseStore>(config.responses_store);
    ctx.responses = impl->responses.get();
  }
  ctx.tool_format = tool_format;
  ctx.reasoning = reasoning;
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Result<std::unique_ptr<Server>> Server::create_router(const ServerConfig& config,
                                                      std::vector<ModelSpec> catalog,
                                                      ModelLoader loader, RouterConfig router) {
  if (config.io_threads < 1) return Error("io_threads must be >= 1");
  if (config.max_queue < 0) return Error("--max-queue must be >= 0");
  if (!(config.ttft_slo_factor == 0 || config.ttft_slo_factor >= 1) ||
      !std::isfinite(config.ttft_slo_factor))
    return Error("--ttft-slo-factor must be 0 (off) or a finite number >= 1");
  if (config.max_body_bytes < 1) return Error("--max-body-bytes must be >= 1");
  if (!(config.drain_timeout_s >= 0)) return Error("--drain-timeout must be >= 0");
  if (!(config.request_timeout_s >= 0) || !std::isfinite(config.request_timeout_s))
    return Error("--request-timeout must be a finite number of seconds >= 0 (0: no limit)");
  if (catalog.empty()) return Error("router mode needs at least one model");
  if (!config.vision.mmproj.empty())
    return Error("--mmproj serves one model: it is not supported in router mode yet");
  if (router.max_loaded < 0) return Error("--models-max must be >= 0");
  if (!(router.idle_unload_s >= 0)) return Error("--idle-unload must be >= 0");
  for (size_t i = 0; i < catalog.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (catalog[i].name == catalog[j].name)
        return make_error("two models are named '{}' ({} and {}): name one with -m NAME=FILE",
                          catalog[i].name, catalog[j].path, catalog[i].path);
  // The formats are checked once here (each model resolves "auto" from its own template).
  if (auto f = resolve_output_formats(config.tool_call_parser, config.reasoning_parser, ""); !f)
    return f.error_value();
  std::unique_ptr<net::ssl::context> tls;
  if (!config.ssl_ca_certs.empty() && config.ssl_certfile.empty())
    return Error("--ssl-ca-certs needs --ssl-certfile and --ssl-keyfile");
  if (!config.ssl_certfile.empty() || !config.ssl_keyfile.empty()) {
    auto made = make_tls_context(config.ssl_certfile, config.ssl_keyfile, config.ssl_ca_certs);
    if (!made) return made.error_value();
    tls = std::move(*made);
  }
  auto impl = std::make_unique<Impl>(config.io_threads);
  impl->config = config;
  impl->tls = std::move(tls);
  PoolConfig pc;
  pc.max_loaded = router.max_loaded;
  pc.memory_budget = router.memory_budget;
  pc.idle_unload_s = router.idle_unload_s;
  pc.max_waiting = config.max_queue;
  pc.bridge = BridgeConfig{.max_queue = config.max_queue, .warmup = config.warmup,
                           .heartbeat_interval_s = config.heartbeat_interval_s,
                           .heartbeat_timeout_s = config.heartbeat_timeout_s,
                           .on_fatal = config.on_fatal,
                           .ttft_slo_factor = config.ttft_slo_factor};
  pc.tool_call_parser = config.tool_call_parser;
  pc.reasoning_parser = config.reasoning_parser;
  pc.slow_load_model = router.slow_load_model;
  pc.slow_load_delay = router.slow_load_delay;
  impl->pool = std::make_unique<ModelPool>(std::move(catalog), std::move(loader), impl->metrics,
                                           std::move(pc));
  ServerContext& ctx = impl->ctx;
  ctx.created = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  ctx.max_body_bytes = config.max_body_bytes;
  ctx.request_timeout_s = config.request_timeout_s;
  ctx.pool = impl->pool.get();
  ctx.metrics = &impl->metrics;
  ctx.keys = ApiKeys(config.api_keys);
  ctx.webui = config.webui;
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Status Server::start() {
  Impl& m = *impl_;
  boost::system::error_code ec;
  const auto address = net::ip::make_address(m.config.host, ec);
  if (ec) return make_error("--host '{}': {}", m.config.host, ec.message());
  m.listener = std::make_shared<Listener>(*m.ioc, m.ctx, m.tls.get());
  ec = m.listener->open({address, m.config.port});
  if (ec) return make_error("cannot listen on {}:{}: {}", m.config.host, m.config.port, ec.message());
  m.port = m.listener->port();
  m.started = true;
  if (m.bridge) m.bridge->start();
  if (m.pool) m.pool->start();
  m.listener->start();
  if (m.config.handle_signals) {
    m.signals = std::make_unique<net::signal_set>(*m.ioc, SIGINT, SIGTERM);
    wait_for_signal();
  }
  for (int i = 0; i < m.config.io_threads; ++i) m.io_threads.emplace_back([&m] { m.ioc->run(); });
  return {};
}

void Server::wait_for_signal() {
  // The first SIGTERM/SIGINT drains; another one aborts whatever is still running.
  impl_->signals->async_wait([this](const boost::system::error_code& e, int sig) {
    if (e) return;
    if (!impl_->drain_started.load()) {
      spdlog::info("signal {}: starting a graceful drain", sig);
      request_drain();
    } else {
      spdlog::warn("signal {} during the drain: aborting the running requests", sig);
      impl_->abort_all();
    }
    wait_for_signal();
  });
}

uint16_t Server::port() const { return impl_->port; }
bool Server::tls() const { return impl_->tls != nullptr; }
bool Server::ready() const {
  return (impl_->pool || impl_->bridge->ready()) && !impl_->ctx.draining.load();
}
ModelPool* Server::pool() { return impl_->pool.get(); }
ServerContext& Server::context() { return impl_->ctx; }
Metrics& Server::metrics() { return impl_->metrics; }

void Server::request_drain() {
  if (impl_->drain_started.exchange(true)) return;
  // Synchronously: from here on /ready is 503 and new generations are refused.
  impl_->ctx.draining.store(true);
  if (impl_->bridge) impl_->bridge->stop_accepting();
  if (impl_->pool) impl_->pool->stop_accepting();
  impl_->drain_thread = std::thread([this] { impl_->drain(); });
}

void Server::wait() {
  std::unique_lock lock(impl_->mu);
  impl_->stopped_cv.wait(lock, [this] { return impl_->stopped; });
}

}  // namespace cadenza::server
