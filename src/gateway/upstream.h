// Upstream replicas and the pools that hold them.
//
// Upstream: one replica (an address). It tracks outstanding requests, the verdict of the active
// /ready checks, a circuit breaker fed by passive failures, and idle keep-alive connections.
//   Circuit breaker: closed --(eject_after_failures consecutive failures)--> open (no requests
//   for eject_ms) --> half-open (one probe request) --success--> closed, --failure--> open again
//   with twice the period (at most max_eject_ms).
// VersionPool: the replicas of one model version ("name@version"), replaced as a whole when DNS
//   answers change (ReplicaSet is immutable; readers take a shared_ptr snapshot).
// ModelPool: the versions of one model name with their canary weights.
//
// Thread-safety: Upstream and VersionPool are safe to use from any thread (atomics and a mutex).
// Ownership: pools hold shared_ptr<Upstream>; the Gateway keeps a registry of weak_ptrs so that a
// reload or a DNS change reuses the same Upstream (and its health state) for the same address.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include "gateway/config.h"
#include "gateway/router.h"
#include "gateway/upstream_stream.h"

namespace cadenza::gateway {

using Clock = std::chrono::steady_clock;

struct BreakerSettings {
  int eject_after_failures = 3;
  int eject_ms = 5000;
  int max_eject_ms = 60000;
};

// How an Upstream is reached over TLS (null: plain TCP).
struct UpstreamTls {
  std::shared_ptr<boost::asio::ssl::context> ctx;
  std::string server_name;  // SNI and the name the certificate must carry
  bool verify = true;
};

class Upstream {
 public:
  Upstream(std::string address, boost::asio::ip::tcp::endpoint endpoint,
           std::shared_ptr<const UpstreamTls> tls = nullptr);
  const UpstreamTls* tls() const { return tls_.get(); }
  const std::string& address() const { return address_; }  // "ip:port", also the metrics label
  const boost::asio::ip::tcp::endpoint& endpoint() const { return endpoint_; }

  std::atomic<int> outstanding{0};
  std::atomic<bool> healthy{true};  // the last active check (true until one says otherwise)
  // Bumped by every active check that timed out when the one before it timed out too
  // (kHungAfterTimeouts in a row): the replica accepts connections but does not answer
  // (stopped, hung), and not only once (a slow link, a lost SYN). Proxied calls in flight to it
  // watch this and give up (UpstreamCall::watch_for_hang), so a hung replica holds no request
  // until upstream_timeout_ms. A check that got an answer (503 while draining, say) resets the
  // count: that replica is alive.
  std::atomic<uint64_t> hung_epoch{0};
  std::atomic<int> check_timeouts_in_a_row{0};
  static constexpr int kHungAfterTimeouts = 2;

  // May a request go here now (healthy, and the breaker closed or ready for its probe)?
  bool eligible(Clock::time_point now) const;
  // Called for the chosen replica: an open breaker past its period turns half-open and this
  // request becomes its probe.
  void on_dispatch(Clock::time_point now);
  void on_success();
  // A failure before the response was complete (connect, reset, 5xx). Returns true when this
  // failure opened the breaker.
  bool on_failure(Clock::time_point now, const BreakerSettings& s);
  bool breaker_open(Clock::time_point now) const;

  // Idle keep-alive connections (at most kMaxIdle kept).
  std::unique_ptr<UpstreamStream> take_idle();
  void put_idle(std::unique_ptr<UpstreamStream> s);
  void drop_idle();

 private:
  static constexpr size_t kMaxIdle = 64;
  enum class State { closed, open, half_open };
  const std::string address_;
  const boost::asio::ip::tcp::endpoint endpoint_;
  const std::shared_ptr<const UpstreamTls> tls_;
  mutable std::mutex mu_;
  State state_ = State::closed;
  int failures_ = 0;
  int open_ms_ = 0;
  Clock::time_point open_until_{};
  std::vector<std::unique_ptr<UpstreamStream>> idle_;
};

// An immutable set of replicas and their hash ring.
struct ReplicaSet {
  std::vector<std::shared_ptr<Upstream>> replicas;
  HashRing ring;
};

class VersionPool {
 public:
  VersionPool(std::string model, VersionConfig cfg,
              std::shared_ptr<boost::asio::ssl::context> tls_ctx = nullptr);
  // The version's TLS client context (null: plain), made once per configuration load.
  const std::shared_ptr<boost::asio::ssl::context>& tls_context() const { return tls_ctx_; }
  const std::string& key() const { return key_; }  // "name@version", or "name"
  const std::string& model() const { return model_; }
  const VersionConfig& config() const { return cfg_; }
  std::shared_ptr<const ReplicaSet> replicas() const;
  void set_replicas(std::vector<std::shared_ptr<Upstream>> ups, int virtual_nodes);

 private:
  std::string model_;
  std::string key_;
  VersionConfig cfg_;
  std::shared_ptr<boost::asio::ssl::context> tls_ctx_;
  mutable std::mutex mu_;
  std::shared_ptr<const ReplicaSet> set_;
};

struct ModelPool {
  std::string name;
  std::vector<std::shared_ptr<VersionPool>> versions;
  // The version for a bare-name request: weighted by `weight`; u in [0, 1).
  VersionPool* pick_version(double u) const;
  VersionPool* find_version(const std::string& version) const;
};

}  // namespace cadenza::gateway
