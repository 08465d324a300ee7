// `cadenza gateway`: the front door for many replicas and model versions (README.md here,
// docs/gateway.md for users).
//
// Threads: `io_threads` threads run one io_context: listeners, client sessions (one coroutine
// per connection), upstream calls, the health checker and the DNS refresher.
// Reload: reload() builds a new GatewayState and swaps it in; requests in flight keep the state
// they started with (shared_ptr), so open streams continue. Listeners are not changed by a reload
// (a changed listener list is reported and needs a restart).
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl/context.hpp>

#include "gateway/response_affinity.h"
#include "gateway/config.h"
#include "gateway/metrics.h"
#include "gateway/state.h"
#include "util/result.h"

namespace cadenza::gateway {

class Gateway {
 public:
  // `config_path`: the file SIGHUP / reload_from_file() reads again (may be empty).
  // `dns_lookup`: how the refresher looks up `dns` names (empty: resolve_async, the system's).
  static Result<std::unique_ptr<Gateway>> create(const GatewayConfig& cfg,
                                                 std::string config_path = {},
                                                 DnsLookup dns_lookup = {});
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Binds the listeners and starts the threads. Errors: address in use, bad host.
  Status start();
  // The bound ports, in the order of config.listeners (valid after start()).
  std::vector<uint16_t> ports() const { return ports_; }
  // SIGHUP: reload_from_file(); SIGTERM/SIGINT: stop(). Call before start().
  void handle_signals() { handle_signals_ = true; }
  // The web console at / and /webui/* (docs/webui.md); on by default (--no-webui: off).
  void set_webui(bool on) { webui_.store(on); }
  bool webui() const { return webui_.load(); }

  Status reload(const GatewayConfig& cfg);
  Status reload_from_file();
  // Stops accepting, closes connections, joins the threads. Idempotent.
  void stop();
  // Blocks until stop() (or a signal) has stopped the gateway.
  void wait();

  std::shared_ptr<const GatewayState> state() const;
  GatewayMetrics& metrics() { return metrics_; }
  UpstreamRegistry& registry() { return registry_; }
  // Which replica stored each Responses API response (kept across reloads).
  ResponseAffinity& response_affinity() { return response_affinity_; }
  boost::asio::io_context& io() { return *io_; }
  // A uniform number in [0, 1) (thread-safe), for canary weights.
  double uniform();
  uint64_t next_rotation() { return rotation_.fetch_add(1); }

 private:
  Gateway(std::shared_ptr<GatewayState> st, std::string path, DnsLookup dns_lookup);
  // `tls`: the listener's HTTPS context (null: plain HTTP).
  void accept_loop(std::shared_ptr<boost::asio::ip::tcp::acceptor> acc,
                   std::shared_ptr<boost::asio::ssl::context> tls);
  void start_maintenance();  // maintenance.cpp: health checks and DNS refresh
  void update_upstream_gauges();
  void on_signal(const boost::system::error_code& ec, int sig);

  std::string config_path_;
  const DnsLookup dns_lookup_;
  // A pointer so that ~Gateway can destroy it (and the sessions suspended in it) first.
  std::unique_ptr<boost::asio::io_context> io_ = std::make_unique<boost::asio::io_context>();
  std::vector<std::thread> threads_;
  std::vector<std::shared_ptr<boost::asio::ip::tcp::acceptor>> acceptors_;
  std::vector<std::shared_ptr<boost::asio::ssl::context>> listener_tls_;  // per acceptor; null: plain
  std::vector<uint16_t> ports_;
  std::unique_ptr<boost::asio::signal_set> signals_;
  bool handle_signals_ = false;
  std::atomic<bool> webui_{true};
  ResponseAffinity response_affinity_;

  UpstreamRegistry registry_;
  GatewayMetrics metrics_;
  mutable std::mutex mu_;
  std::shared_ptr<GatewayState> state_;
  std::mutex reload_mu_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_{0x9e3779b97f4a7c15ull};
  std::atomic<uint64_t> rotation_{0};

  std::mutex stop_mu_;
  std::condition_variable stopped_cv_;
  bool stopped_ = false;
  bool stop_requested_ = false;
  bool started_ = false;
};

}  // namespace cadenza::gateway
