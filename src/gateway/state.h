// What one configuration turns into: the model pools with their replicas, the tenants, the
// cache. A GatewayState is immutable once built (its pools' replica sets change only through
// VersionPool::set_replicas on DNS answers); requests take a shared_ptr to the current state, so
// a reload never pulls anything out from under a request in flight.
//
// UpstreamRegistry: one Upstream per address for the process, so that reloads and DNS changes
// keep each replica's health, breaker, load counter and idle connections.
// Thread-safety: UpstreamRegistry is safe from any thread; GatewayState is read-only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>  // std::exchange, used by asio/awaitable.hpp without including it
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "gateway/cache.h"
#include "gateway/config.h"
#include "gateway/tenants.h"
#include "gateway/upstream.h"
#include "util/result.h"

namespace cadenza::gateway {

class UpstreamRegistry {
 public:
  // `tls` (null: plain) is part of the identity: the same address over TLS with other settings
  // is another Upstream. The first Upstream made for a key keeps its TLS context.
  std::shared_ptr<Upstream> get(const boost::asio::ip::tcp::endpoint& ep,
                                std::shared_ptr<const UpstreamTls> tls = nullptr,
                                const std::string& tls_id = {});
  // Every live Upstream (referenced by some state).
  std::vector<std::shared_ptr<Upstream>> all();

 private:
  std::mutex mu_;
  std::map<std::string, std::weak_ptr<Upstream>> by_address_;
};

struct GatewayState {
  GatewayConfig config;
  std::map<std::string, std::shared_ptr<ModelPool>> models;
  std::shared_ptr<Tenants> tenants;
  std::shared_ptr<ResponseCache> cache;  // null: off
  BreakerSettings breaker;

  // "name", "name@version" or "default" -> the version pool (bare names pick by weight with u).
  // Null when unknown.
  VersionPool* resolve(const std::string& requested, double u) const;

  // The ids GET /v1/models lists: "default", every model name and every "name@version". With a
  // tenant, only the ids it may use whichever version they resolve to (a bare name reaches its
  // versions of weight > 0), so that every listed id is one the tenant can call.
  std::vector<std::string> model_ids(const Tenant* tenant) const;
};

// Resolves host:port synchronously (numeric addresses need no lookup). Errors: unknown host.
Result<std::vector<boost::asio::ip::tcp::endpoint>> resolve_now(const HostPort& hp);

// How the DNS refresher looks up a `dns` name (maintenance.cpp). The default, resolve_async, asks
// the system resolver without blocking the io threads; tests pass their own to count lookups or
// to change the answers. Runs on an io thread; must not block.
using DnsLookup = std::function<boost::asio::awaitable<Result<std::vector<boost::asio::ip::tcp::endpoint>>>(
    const HostPort&)>;
boost::asio::awaitable<Result<std::vector<boost::asio::ip::tcp::endpoint>>> resolve_async(
    const HostPort& hp);

// Builds the state for `cfg`. Reuses `previous`'s tenants' buckets (same limits) and cache (same
// cache settings). Static upstreams and DNS names are resolved now; a DNS name that does not
// resolve yet is not an error (the periodic refresh retries), a static one is.
Result<std::shared_ptr<GatewayState>> build_state(const GatewayConfig& cfg,
                                                  const GatewayState* previous,
                                                  UpstreamRegistry& registry);

// The replicas of `v` for the given DNS answers (static entries are resolved again, too).
// `tls_ctx`: the version's TLS context (VersionPool::tls_context; null for plain upstreams).
std::vector<std::shared_ptr<Upstream>> replicas_for(
    const VersionConfig& v, const std::vector<boost::asio::ip::tcp::endpoint>& dns_answers,
    UpstreamRegistry& registry,
    const std::shared_ptr<boost::asio::ssl::context>& tls_ctx = nullptr);

}  // namespace cadenza::gateway
