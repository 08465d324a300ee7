#include "gateway/state.h"

#include <algorithm>
#include <set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gateway/upstream_tls.h"

namespace cadenza::gateway {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

std::string address_of(const tcp::endpoint& ep) {
  const auto a = ep.address();
  return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" +
         std::to_string(ep.port());
}

bool same_cache(const CacheConfig& a, const CacheConfig& b) {
  return a.backend == b.backend && a.max_entries == b.max_entries && a.ttl_s == b.ttl_s &&
         a.max_entry_bytes == b.max_entry_bytes && a.redis_host == b.redis_host &&
         a.redis_port == b.redis_port && a.redis_prefix == b.redis_prefix &&
         a.redis_timeout_ms == b.redis_timeout_ms;
}

}  // namespace

std::shared_ptr<Upstream> UpstreamRegistry::get(const tcp::endpoint& ep,
                                                std::shared_ptr<const UpstreamTls> tls,
                                                const std::string& tls_id) {
  const std::string addr = address_of(ep);
  const std::string key = tls ? addr + "|tls|" + tls->server_name + "|" + tls_id : addr;
  std::lock_guard lock(mu_);
  if (auto it = by_address_.find(key); it != by_address_.end())
    if (auto up = it->second.lock()) return up;
  auto up = std::make_shared<Upstream>(addr, ep, std::move(tls));
  by_address_[key] = up;
  return up;
}

std::vector<std::shared_ptr<Upstream>> UpstreamRegistry::all() {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Upstream>> out;
  for (auto it = by_address_.begin(); it != by_address_.end();) {
    if (auto up = it->second.lock()) {
      out.push_back(std::move(up));
      ++it;
    } else {
      it = by_address_.erase(it);
    }
  }
  return out;
}

VersionPool* GatewayState::resolve(const std::string& requested, double u) const {
  std::string name = requested;
  if (name == "default") name = config.default_model;
  const size_t at = name.find('@');
  const std::string base = name.substr(0, at);
  auto it = models.find(base);
  if (it == models.end()) return nullptr;
  if (at == std::string::npos) return it->second->pick_version(u);
  return it->second->find_version(name.substr(at + 1));
}

std::vector<std::string> GatewayState::model_ids(const Tenant* tenant) const {
  // The versions `requested` ("default", "name" or "name@version") can resolve to.
  auto reachable = [&](const std::string& requested) {
    std::vector<const VersionPool*> out;
    const std::string name = requested == "default" ? config.default_model : requested;
    const size_t at = name.find('@');
    auto it = models.find(name.substr(0, at));
    if (it == models.end()) return out;
    if (at != std::string::npos) {
      if (const VersionPool* v = it->second->find_version(name.substr(at + 1))) out.push_back(v);
      return out;
    }
    for (const auto& v : it->second->versions)
      if (v->config().weight > 0) out.push_back(v.get());
    return out;
  };
  auto listed = [&](const std::string& requested) {
    if (!tenant) return true;
    const auto versions = reachable(requested);
    return std::all_of(versions.begin(), versions.end(), [&](const VersionPool* v) {
      return tenant->allows(requested, v->model(), v->key());
    });
  };
  std::vector<std::string> ids;
  auto add = [&](const std::string& id) {
    if (listed(id)) ids.push_back(id);
  };
  add("default");
  for (const auto& [name, pool] : models) {
    add(name);
    for (const auto& v : pool->versions)
      if (v->key() != name) add(v->key());
  }
  return ids;
}

Result<std::vector<tcp::endpoint>> resolve_now(const HostPort& hp) {
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(hp.host, ec);
  if (!ec) return std::vector<tcp::endpoint>{tcp::endpoint(addr, static_cast<uint16_t>(
                                                                     std::stoi(hp.port)))};
  asio::io_context io;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(hp.host, hp.port, ec);
  if (ec) return make_error("{}: {}", hp.str(), ec.message());
  std::vector<tcp::endpoint> out;
  for (const auto& r : results) out.push_back(r.endpoint());
  return out;
}

asio::awaitable<Result<std::vector<tcp::endpoint>>> resolve_async(const HostPort& hp) {
  tcp::resolver resolver(co_await asio::this_coro::executor);
  boost::system::error_code ec;
  auto results = co_await resolver.async_resolve(hp.host, hp.port,
                                                 asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return make_error("{}: {}", hp.str(), ec.message());
  std::vector<tcp::endpoint> out;
  for (const auto& r : results) out.push_back(r.endpoint());
  co_return out;
}

std::vector<std::shared_ptr<Upstream>> replicas_for(
    const VersionConfig& v, const std::vector<tcp::endpoint>& dns_answers,
    UpstreamRegistry& registry, const std::shared_ptr<boost::asio::ssl::context>& tls_ctx) {
  std::vector<std::shared_ptr<Upstream>> out;
  std::set<std::string> seen;
  // The name a replica's certificate must carry: tls_server_name, else the host written in the
  // entry (for `dns` answers: the first dns name).
  auto tls_for = [&](const std::string& host) -> std::shared_ptr<const UpstreamTls> {
    if (!tls_ctx) return nullptr;
    return std::make_shared<UpstreamTls>(
        UpstreamTls{tls_ctx, v.tls.server_name.empty() ? host : v.tls.server_name, v.tls.verify});
  };
  auto add = [&](const tcp::endpoint& ep, const std::string& host) {
    auto up = registry.get(ep, tls_for(host), v.tls.id());
    if (seen.insert(up->address()).second) out.push_back(std::move(up));
  };
  for (const auto& hp : v.upstreams) {
    auto eps = resolve_now(hp);
    if (eps && !eps->empty()) add(eps->front(), hp.host);
  }
  for (const auto& ep : dns_answers) add(ep, v.dns.empty() ? std::string() : v.dns.front().host);
  return out;
}

Result<std::shared_ptr<GatewayState>> build_state(const GatewayConfig& cfg,
                                                  const GatewayState* previous,
                                                  UpstreamRegistry& registry) {
  auto st = std::make_shared<GatewayState>();
  st->config = cfg;
  st->breaker = {cfg.health.eject_after_failures, cfg.health.eject_ms, cfg.health.max_eject_ms};
  for (const auto& m : cfg.models) {
    auto pool = std::make_shared<ModelPool>();
    pool->name = m.name;
    for (const auto& v : m.versions) {
      for (const auto& hp : v.upstreams) {
        auto eps = resolve_now(hp);
        if (!eps) return make_error("models '{}': upstream {}", m.name, eps.error());
      }
      std::vector<tcp::endpoint> dns;
      for (const auto& hp : v.dns) {
        auto eps = resolve_now(hp);
        if (!eps) {
          spdlog::warn("gateway: {} does not resolve yet ({}); retrying every {} ms", hp.str(),
                       eps.error(), cfg.dns_refresh_ms);
          continue;
        }
        dns.insert(dns.end(), eps->begin(), eps->end());
      }
      std::shared_ptr<boost::asio::ssl::context> tls_ctx;
      if (v.tls.enabled) {
        auto made = make_upstream_tls_context(
            v.tls, v.version.empty() ? fmt::format("models '{}'", m.name)
                                     : fmt::format("models '{}@{}'", m.name, v.version));
        if (!made) return made.error_value();
        tls_ctx = std::move(*made);
      }
      auto vp = std::make_shared<VersionPool>(m.name, v, tls_ctx);
      vp->set_replicas(replicas_for(v, dns, registry, tls_ctx), cfg.routing.virtual_nodes);
      pool->versions.push_back(std::move(vp));
    }
    st->models[m.name] = std::move(pool);
  }
  st->tenants = std::make_shared<Tenants>(cfg.tenants, previous ? previous->tenants.get() : nullptr);
  if (previous && same_cache(previous->config.cache, cfg.cache)) {
    st->cache = previous->cache;
  } else {
    auto cache = make_cache(cfg.cache);
    if (!cache) return cache.error_value();
    st->cache = std::move(*cache);
  }
  return st;
}

}  // namespace cadenza::gateway
