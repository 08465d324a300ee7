#include "gateway/gateway.h"

#include <csignal>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <spdlog/spdlog.h>

#include "gateway/session.h"
#include "server/tls.h"

namespace cadenza::gateway {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

Gateway::Gateway(std::shared_ptr<GatewayState> st, std::string path, DnsLookup dns_lookup)
    : config_path_(std::move(path)),
      dns_lookup_(dns_lookup ? std::move(dns_lookup) : DnsLookup(resolve_async)),
      state_(std::move(st)) {}

Result<std::unique_ptr<Gateway>> Gateway::create(const GatewayConfig& cfg, std::string config_path,
                                                 DnsLookup dns_lookup) {
  std::unique_ptr<Gateway> gw(new Gateway(nullptr, std::move(config_path), std::move(dns_lookup)));
  auto st = build_state(cfg, nullptr, gw->registry_);
  if (!st) return st.error_value();
  gw->state_ = std::move(*st);
  return gw;
}

Gateway::~Gateway() {
  stop();
  // Sockets must go before the io_context: the acceptors, the idle upstream connections, then
  // the io_context (which destroys suspended sessions) and only then the state.
  acceptors_.clear();
  signals_.reset();
  for (const auto& up : registry_.all()) up->drop_idle();
  io_.reset();  // see gateway.h: destroyed here, before the members it refers to
}

std::shared_ptr<const GatewayState> Gateway::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

double Gateway::uniform() {
  std::lock_guard lock(rng_mu_);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

Status Gateway::start() {
  std::lock_guard lock(reload_mu_);
  if (started_) return Error("gateway: already started");
  const GatewayConfig& cfg = state()->config;
  for (const auto& l : cfg.listeners) {
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(l.host, ec);
    if (ec) return make_error("listener {}: not an IP address", l.host);
    std::shared_ptr<asio::ssl::context> tls;
    if (!l.ssl_certfile.empty()) {
      auto made = server::make_tls_context(l.ssl_certfile, l.ssl_keyfile, l.ssl_ca_certs);
      if (!made) return make_error("listener {}:{}: {}", l.host, l.port, made.error());
      tls = std::move(*made);
    }
    auto acc = std::make_shared<tcp::acceptor>(asio::make_strand(*io_));
    const tcp::endpoint ep(addr, l.port);
    acc->open(ep.protocol(), ec);
    if (!ec) acc->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acc->bind(ep, ec);
    if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return make_error("listener {}:{}: {}", l.host, l.port, ec.message());
    ports_.push_back(acc->local_endpoint().port());
    acceptors_.push_back(acc);
    listener_tls_.push_back(std::move(tls));
  }
  for (size_t i = 0; i < acceptors_.size(); ++i) accept_loop(acceptors_[i], listener_tls_[i]);
  if (handle_signals_) {
    signals_ = std::make_unique<asio::signal_set>(*io_, SIGHUP, SIGTERM, SIGINT);
    signals_->async_wait([this](const boost::system::error_code& ec, int sig) { on_signal(ec, sig); });
  }
  start_maintenance();
  const int n = std::max(1, cfg.io_threads);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { io_->run(); });
  started_ = true;
  return {};
}

void Gateway::on_signal(const boost::system::error_code& ec, int sig) {
  if (ec) return;
  if (sig == SIGHUP) {
    auto r = reload_from_file();
    if (!r) spdlog::error("gateway: reload failed, keeping the old configuration: {}", r.error());
    signals_->async_wait([this](const boost::system::error_code& e, int s) { on_signal(e, s); });
    return;
  }
  spdlog::info("gateway: signal {}, stopping", sig);
  std::lock_guard l(stop_mu_);
  stop_requested_ = true;
  stopped_cv_.notify_all();
}

void Gateway::accept_loop(std::shared_ptr<tcp::acceptor> acc,
                          std::shared_ptr<asio::ssl::context> tls) {
  acc->async_accept(asio::make_strand(*io_), [this, acc, tls](boost::system::error_code ec,
                                                              tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acc->is_open()) return;
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      auto ex = socket.get_executor();
      asio::co_spawn(ex, serve_connection(*this, std::move(socket), tls), asio::detached);
    } else {
      spdlog::warn("gateway: accept: {}", ec.message());
    }
    accept_loop(acc, tls);
  });
}

Status Gateway::reload(const GatewayConfig& cfg) {
  std::lock_guard lock(reload_mu_);
  auto old = state();
  auto st = build_state(cfg, old.get(), registry_);
  if (!st) {
    metrics_.inc("cadenza_gateway_config_reloads_total", {{"result", "error"}});
    return st.error_value();
  }
  if (started_) {
    bool same = cfg.listeners.size() == old->config.listeners.size();
    for (size_t i = 0; same && i < cfg.listeners.size(); ++i)
      same = cfg.listeners[i].host == old->config.listeners[i].host &&
             cfg.listeners[i].port == old->config.listeners[i].port;
    if (!same) spdlog::warn("gateway: listeners changed; they take effect after a restart");
  }
  {
    std::lock_guard l(mu_);
    state_ = std::move(*st);
  }
  metrics_.inc("cadenza_gateway_config_reloads_total", {{"result", "ok"}});
  spdlog::info("gateway: configuration reloaded ({} models, {} tenants)", cfg.models.size(),
               cfg.tenants.size());
  return {};
}

Status Gateway::reload_from_file() {
  if (config_path_.empty()) return Error("gateway: no configuration file to reload");
  auto cfg = load_config(config_path_);
  if (!cfg) {
    metrics_.inc("cadenza_gateway_config_reloads_total", {{"result", "error"}});
    return cfg.error_value();
  }
  return reload(*cfg);
}

void Gateway::stop() {
  {
    std::lock_guard l(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    stop_requested_ = true;
    stopped_cv_.notify_all();
  }
  for (const auto& acc : acceptors_)
    asio::post(acc->get_executor(), [acc] {
      boost::system::error_code ignored;
      acc->close(ignored);
    });
  io_->stop();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void Gateway::wait() {
  {
    std::unique_lock l(stop_mu_);
    stopped_cv_.wait(l, [&] { return stop_requested_; });
  }
  stop();
}

}  // namespace cadenza::gateway
