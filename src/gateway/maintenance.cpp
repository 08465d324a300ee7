// The Gateway's background work on its io_context: active /ready checks of every replica and
// the periodic re-resolution of DNS upstreams (a Kubernetes headless service answers with the
// addresses of its ready pods, so pods coming and going change the replica set).
#include <set>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "gateway/gateway.h"
#include "gateway/upstream_call.h"

namespace cadenza::gateway {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;
using tcp = asio::ip::tcp;

namespace {

asio::awaitable<void> check_one(Gateway& gw, std::shared_ptr<Upstream> up, int timeout_ms) {
  UpstreamCall call(gw.io().get_executor(), up);
  UpstreamCall::Request req{http::verb::get, "/ready", 11};
  req.set(http::field::host, up->address());
  req.set(http::field::user_agent, "cadenza-gateway-health");
  req.keep_alive(true);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const CallError started =
      co_await call.start(req, deadline, std::chrono::milliseconds(timeout_ms));
  bool ok = started == CallError::none;
  bool timed_out = started == CallError::timeout;
  if (ok) {
    std::string body;
    const CallError read = co_await call.read_all(body, 64 * 1024, deadline);
    timed_out = read == CallError::timeout;
    ok = read == CallError::none && call.status() == 200;
    call.finish();
  }
  // No answer in time (connected or not), again: the replica hangs; the requests in flight to
  // it give up (Upstream::hung_epoch). A refused connection needs no such help: those calls
  // fail anyway.
  if (!timed_out)
    up->check_timeouts_in_a_row.store(0);
  else if (up->check_timeouts_in_a_row.fetch_add(1) + 1 >= Upstream::kHungAfterTimeouts)
    up->hung_epoch.fetch_add(1);
  const bool was = up->healthy.exchange(ok);
  if (was != ok)
    spdlog::warn("gateway: upstream {} is {}{}", up->address(), ok ? "ready again" : "not ready",
                 started == CallError::tls ? " (TLS: " + call.error_text() + ")" : "");
  gw.metrics().set("cadenza_gateway_upstream_healthy", {{"upstream", up->address()}}, ok ? 1 : 0);
}

asio::awaitable<void> health_loop(Gateway& gw) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    const HealthConfig h = gw.state()->config.health;
    if (h.interval_ms > 0) {
      for (auto& up : gw.registry().all())
        asio::co_spawn(gw.io(), check_one(gw, up, h.timeout_ms), asio::detached);
    }
    for (auto& up : gw.registry().all())
      gw.metrics().set("cadenza_gateway_upstream_outstanding", {{"upstream", up->address()}},
                       up->outstanding.load());
    timer.expires_after(std::chrono::milliseconds(h.interval_ms > 0 ? h.interval_ms : 1000));
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
  }
}

asio::awaitable<void> dns_loop(Gateway& gw, DnsLookup lookup) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    auto st = gw.state();
    timer.expires_after(std::chrono::milliseconds(st->config.dns_refresh_ms));
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    st = gw.state();
    for (const auto& [name, pool] : st->models) {
      for (const auto& vp : pool->versions) {
        const VersionConfig& v = vp->config();
        if (v.dns.empty()) continue;
        std::vector<tcp::endpoint> answers;
        bool all_failed = true;
        for (const auto& hp : v.dns) {
          auto found = co_await lookup(hp);
          if (!found) {
            spdlog::warn("gateway: resolving {}", found.error());
            continue;
          }
          all_failed = false;
          answers.insert(answers.end(), found->begin(), found->end());
        }
        if (all_failed) continue;  // keep the last known replicas while DNS is down
        auto fresh = replicas_for(v, answers, gw.registry(), vp->tls_context());
        auto current = vp->replicas();
        std::set<std::string> a, b;
        for (const auto& u : fresh) a.insert(u->address());
        for (const auto& u : current->replicas) b.insert(u->address());
        if (a != b) {
          spdlog::info("gateway: {} now has {} replicas (DNS)", vp->key(), fresh.size());
          vp->set_replicas(std::move(fresh), st->config.routing.virtual_nodes);
        }
      }
    }
  }
}

}  // namespace

void Gateway::start_maintenance() {
  asio::co_spawn(*io_, health_loop(*this), asio::detached);
  asio::co_spawn(*io_, dns_loop(*this, dns_lookup_), asio::detached);
}

}  // namespace cadenza::gateway
