#include "gateway/stored_responses.h"

#include <chrono>
#include <memory>

#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/verb.hpp>
#include <fmt/format.h>

#include "apishape/error.h"
#include "gateway/api_shapes.h"
#include "gateway/auth.h"
#include "gateway/gateway.h"
#include "gateway/response_affinity.h"
#include "gateway/upstream_call.h"

namespace cadenza::gateway {

namespace http = boost::beast::http;

namespace {

constexpr std::string_view kPrefix = "/v1/responses/";

Reply not_found(const std::string& id) {
  return error_reply(404, fmt::format("Response with id '{}' not found.", id),
                     "invalid_request_error", "not_found");
}

// The replica at `home.upstream` among the current replicas of the version `home.version`.
std::shared_ptr<Upstream> find_replica(const GatewayState& st, const ResponseHome& home,
                                       const VersionPool** version) {
  for (const auto& [name, pool] : st.models)
    for (const auto& vp : pool->versions) {
      if (vp->key() != home.version) continue;
      for (const auto& up : vp->replicas()->replicas)
        if (up->address() == home.upstream) {
          *version = vp.get();
          return up;
        }
    }
  return nullptr;
}

}  // namespace

bool is_stored_response_route(std::string_view target) {
  return target.size() > kPrefix.size() && target.rfind(kPrefix, 0) == 0;
}

boost::asio::awaitable<Reply> stored_response_reply(
    Gateway& gw, const http::request<http::string_body>& req, std::string target,
    std::string request_id) {
  constexpr apishape::Api kApi = apishape::Api::kResponses;
  auto st = gw.state();
  const GatewayConfig& cfg = st->config;

  // "{id}" or "{id}/cancel"; ids hold no '/'.
  std::string id = target.substr(kPrefix.size());
  bool cancel = false;
  if (const size_t slash = id.find('/'); slash != std::string::npos) {
    if (id.substr(slash) != "/cancel" || slash == 0)
      co_return shaped(kApi, error_reply(404, fmt::format("no route {}", target),
                                         "invalid_request_error", "not_found"));
    cancel = true;
    id.resize(slash);
  }
  const http::verb m = req.method();
  const bool allowed = cancel ? m == http::verb::post
                              : m == http::verb::get || m == http::verb::head || m == http::verb::delete_;
  if (!allowed) {
    Reply r = error_reply(405,
                          fmt::format("{} does not allow {}", cancel ? "/v1/responses/{id}/cancel"
                                                                     : "/v1/responses/{id}",
                                      std::string(req.method_string())),
                          "invalid_request_error", "method_not_allowed");
    r.headers.emplace_back("Allow", cancel ? "POST" : "GET, DELETE");
    co_return shaped(kApi, std::move(r));
  }

  Caller caller = identify_caller(*st->tenants, req, request_id);
  if (caller.refusal) co_return shaped(kApi, std::move(*caller.refusal));
  const std::string tenant = caller.tenant ? caller.tenant->name() : "anonymous";

  const std::optional<ResponseHome> home = gw.response_affinity().find(id, tenant);
  if (!home) co_return shaped(kApi, not_found(id));
  const VersionPool* vp = nullptr;
  std::shared_ptr<Upstream> up = find_replica(*st, *home, &vp);
  if (!up) {
    // The configuration no longer has that replica (a reload, a DNS change): nobody can answer.
    gw.response_affinity().forget(id, tenant);
    co_return shaped(kApi, not_found(id));
  }

  UpstreamCall::Request ureq{m, std::string(req.target()), 11};
  ureq.set(http::field::host, up->address());
  ureq.set(http::field::user_agent, "cadenza-gateway");
  ureq.set("X-Request-Id", request_id);
  if (!vp->config().api_key.empty())
    ureq.set(http::field::authorization, "Bearer " + vp->config().api_key);
  if (m == http::verb::post) {
    ureq.set(http::field::content_type, "application/json");
    ureq.body() = req.body();
  }
  ureq.keep_alive(true);
  ureq.prepare_payload();

  UpstreamCall call(gw.io().get_executor(), up);
  const auto deadline = Clock::now() + std::chrono::milliseconds(cfg.upstream_timeout_ms);
  CallError err =
      co_await call.start(ureq, deadline, std::chrono::milliseconds(cfg.connect_timeout_ms));
  std::string body;
  if (err == CallError::none) err = co_await call.read_all(body, cfg.max_body_bytes, deadline);
  if (err != CallError::none)
    co_return shaped(kApi, error_reply(502,
                                       fmt::format("the replica {} that stored response '{}' did "
                                                   "not answer ({})",
                                                   up->address(), id, to_string(err)),
                                       "server_error", "upstream_unavailable"));
  Reply r;
  r.status = call.status();
  r.body = std::move(body);
  if (auto it = call.headers().find(http::field::content_type); it != call.headers().end())
    r.content_type = std::string(it->value());
  r.headers.emplace_back("X-Cadenza-Upstream", up->address());
  call.finish();
  if ((m == http::verb::delete_ && r.status == 200) || r.status == 404)
    gw.response_affinity().forget(id, tenant);
  co_return r;
}

}  // namespace cadenza::gateway
