#include "server/server.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <condition_variable>
#include <csignal>
#include <optional>

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
  std::unique_ptr<EngineBridge> bridge;
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

  void drain() {
    spdlog::info("draining: no new requests; {} in flight (timeout {} s)", bridge->in_flight(),
                 config.drain_timeout_s);
    if (listener) listener->close();
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(config.drain_timeout_s * 1000));
    if (!bridge->wait_idle(timeout)) {
      spdlog::warn("drain timeout: aborting {} requests", bridge->in_flight());
      bridge->abort_all();
      bridge->wait_idle(std::chrono::seconds(10));
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
                                               std::unique_ptr<ChatRenderer> chat) {
  if (config.io_threads < 1) return Error("io_threads must be >= 1");
  if (config.max_queue < 0) return Error("--max-queue must be >= 0");
  if (config.max_body_bytes < 1) return Error("--max-body-bytes must be >= 1");
  if (!(config.drain_timeout_s >= 0)) return Error("--drain-timeout must be >= 0");
  std::unique_ptr<net::ssl::context> tls;
  if (!config.ssl_certfile.empty() || !config.ssl_keyfile.empty()) {
    auto made = make_tls_context(config.ssl_certfile, config.ssl_keyfile);
    if (!made) return made.error_value();
    tls = std::move(*made);
  }
  const std::string& template_text = chat->source();
  toolcall::ToolCallFormat tool_format = toolcall::ToolCallFormat::kHermes;
  if (config.tool_call_parser == "auto") {
    if (auto f = toolcall::detect_tool_call_format(template_text)) tool_format = *f;
  } else if (auto f = toolcall::parse_tool_call_format(config.tool_call_parser)) {
    tool_format = *f;
  } else {
    return make_error("--tool-call-parser: unknown format '{}'", config.tool_call_parser);
  }
  toolcall::ReasoningFormat reasoning = toolcall::detect_reasoning_format(template_text);
  if (config.reasoning_parser != "auto") {
    auto r = toolcall::parse_reasoning_format(config.reasoning_parser);
    if (!r) return make_error("--reasoning-parser: unknown format '{}'", config.reasoning_parser);
    reasoning = *r;
  }
  spdlog::info("tool calls: {} format; reasoning: {}", toolcall::tool_call_format_name(tool_format),
               toolcall::reasoning_format_name(reasoning));
  auto impl = std::make_unique<Impl>(config.io_threads);
  impl->config = config;
  impl->grammars = std::make_unique<GrammarCache>(grammar::TokenIndex::from_tokenizer(tokenizer));
  impl->tls = std::move(tls);
  impl->chat = std::move(chat);
  const int32_t max_model_len = engine->config().max_model_len;
  impl->bridge = std::make_unique<EngineBridge>(
      std::move(engine), tokenizer, impl->metrics,
      BridgeConfig{.max_queue = config.max_queue, .warmup = config.warmup,
                   .heartbeat_interval_s = config.heartbeat_interval_s,
                   .heartbeat_timeout_s = config.heartbeat_timeout_s,
                   .on_fatal = config.on_fatal});
  ServerContext& ctx = impl->ctx;
  ctx.model_name = config.model_name;
  ctx.created = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  ctx.max_model_len = max_model_len;
  ctx.max_body_bytes = config.max_body_bytes;
  ctx.tokenizer = &tokenizer;
  ctx.chat = impl->chat.get();
  ctx.bridge = impl->bridge.get();
  ctx.metrics = &impl->metrics;
  ctx.keys = ApiKeys(config.api_keys);
  ctx.grammars = impl->grammars.get();
  if (config.responses_store > 0) {
    impl->responses = std::make_unique<ResponseStore>(config.responses_store);
    ctx.responses = impl->responses.get();
  }
  ctx.tool_format = tool_format;
  ctx.reasoning = reasoning;
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
  m.bridge->start();
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
      impl_->bridge->abort_all();
    }
    wait_for_signal();
  });
}

uint16_t Server::port() const { return impl_->port; }
bool Server::tls() const { return impl_->tls != nullptr; }
bool Server::ready() const { return impl_->bridge->ready() && !impl_->ctx.draining.load(); }
ServerContext& Server::context() { return impl_->ctx; }
Metrics& Server::metrics() { return impl_->metrics; }

void Server::request_drain() {
  if (impl_->drain_started.exchange(true)) return;
  // Synchronously: from here on /ready is 503 and new generations are refused.
  impl_->ctx.draining.store(true);
  impl_->bridge->stop_accepting();
  impl_->drain_thread = std::thread([this] { impl_->drain(); });
}

void Server::wait() {
  std::unique_lock lock(impl_->mu);
  impl_->stopped_cv.wait(lock, [this] { return impl_->stopped; });
}

}  // namespace cadenza::server
