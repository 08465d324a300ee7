#include "gateway/proxy.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "gateway/api_shapes.h"
#include "gateway/auth.h"
#include "gateway/gateway.h"
#include "gateway/hashing.h"
#include "gateway/responses.h"
#include "gateway/router.h"
#include "gateway/upstream_call.h"
#include "wire/sse.h"

namespace cadenza::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using nlohmann::json;

namespace {

constexpr auto kClientWriteTimeout = std::chrono::seconds(60);

std::string sv(beast::string_view s) { return std::string(s.data(), s.size()); }

// Keeps a replica's outstanding count for the duration of one upstream call.
struct Outstanding {
  std::shared_ptr<Upstream> up;
  explicit Outstanding(std::shared_ptr<Upstream> u) : up(std::move(u)) { up->outstanding++; }
  ~Outstanding() { up->outstanding--; }
  Outstanding(const Outstanding&) = delete;
  Outstanding& operator=(const Outstanding&) = delete;
};

// Scans SSE bytes for the usage of the stream: a "usage" object when the replica sends one
// (stream_options.include_usage), otherwise the number of content events as the token count.
// Holds at most one partial line (bounded: longer lines are skipped).
class UsageScanner {
 public:
  void feed(std::string_view bytes) {
    while (!bytes.empty()) {
      const size_t nl = bytes.find('\n');
      const std::string_view part = bytes.substr(0, nl);
      if (!overflow_ && line_.size() + part.size() <= kMaxLine)
        line_.append(part);
      else
        overflow_ = true;
      if (nl == std::string_view::npos) return;
      line_done();
      bytes.remove_prefix(nl + 1);
    }
  }
  double tokens(double prompt_estimate) const {
    return usage_total_ >= 0 ? usage_total_ : prompt_estimate + events_;
  }

 private:
  static constexpr size_t kMaxLine = 1 << 16;
  void line_done() {
    if (!overflow_ && line_.rfind("data: {", 0) == 0) {
      if (line_.find("\"usage\"") != std::string::npos) {
        json j = json::parse(line_.substr(6), nullptr, false);
        if (j.is_object() && j.contains("usage") && j["usage"].is_object() &&
            j["usage"].contains("total_tokens") && j["usage"]["total_tokens"].is_number())
          usage_total_ = j["usage"]["total_tokens"].get<double>();
        else
          ++events_;
      } else {
        ++events_;
      }
    }
    line_.clear();
    overflow_ = false;
  }
  std::string line_;
  bool overflow_ = false;
  double events_ = 0;
  double usage_total_ = -1;
};

double usage_tokens(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("usage") || !j["usage"].is_object()) return -1;
  const json& u = j["usage"];
  if (u.contains("total_tokens") && u["total_tokens"].is_number()) return u["total_tokens"].get<double>();
  // Anthropic's Messages usage has no total.
  if (u.contains("input_tokens") && u["input_tokens"].is_number() && u.contains("output_tokens") &&
      u["output_tokens"].is_number())
    return u["input_tokens"].get<double>() + u["output_tokens"].get<double>();
  return -1;
}

double requested_max_tokens(const json& body, int fallback) {
  for (const char* k : {"max_completion_tokens", "max_tokens", "max_output_tokens"})  // chat, Messages, Responses
    if (auto it = body.find(k); it != body.end() && it->is_number() && it->get<double>() >= 0)
      return it->get<double>();
  return fallback;
}

bool is_event_stream(const http::fields& h) {
  auto it = h.find(http::field::content_type);
  return it != h.end() && sv(it->value()).find("text/event-stream") != std::string::npos;
}

// Per-request bookkeeping for the access log and metrics.
struct Outcome {
  int status = 0;
  std::string tenant = "anonymous";
  std::string model = "-";
  std::string upstream = "-";
  std::string cache = "-";
  int attempts = 0;
};

}  // namespace

template <typename ClientStream>
asio::awaitable<bool> proxy_generation(Gateway& gw, ClientStream& client,
                                       const ClientRequest& req) {
  const auto started = Clock::now();
  auto st = gw.state();  // this request keeps this configuration to its end
  const GatewayConfig& cfg = st->config;
  Outcome out;
  double reserved = 0, used = 0;
  std::shared_ptr<Tenant> tenant;
  // /v1/messages and /v1/responses: errors in their API's shape, converted for `api: chat`
  // upstreams (api_shapes.h).
  ShapedCall shape;
  const apishape::Api api = api_of_route(req.route);

  auto write = [&](std::string bytes) -> asio::awaitable<bool> {
    error_code ec;
    beast::get_lowest_layer(client).expires_after(kClientWriteTimeout);
    co_await asio::async_write(client, asio::buffer(bytes),
                               asio::redirect_error(asio::use_awaitable, ec));
    beast::get_lowest_layer(client).expires_never();
    co_return !ec;
  };
  auto finish = [&](bool ok) {
    if (tenant && reserved > 0) tenant->reconcile(reserved, used, Clock::now());
    const double secs = std::chrono::duration<double>(Clock::now() - started).count();
    gw.metrics().inc("cadenza_gateway_requests_total",
                     {{"route", req.route},
                      {"tenant", out.tenant},
                      {"model", out.model},
                      {"status", std::to_string(out.status)}});
    gw.metrics().observe("cadenza_gateway_request_duration_seconds", {{"route", req.route}},
                         secs);
    if (cfg.access_log)
      spdlog::info("[{}] {} {} {} model={} upstream={} cache={} attempts={} {} {:.1f} ms",
                   req.request_id, out.tenant, sv(req.http.method_string()),
                   sv(req.http.target()), out.model, out.upstream, out.cache, out.attempts,
                   out.status, secs * 1e3);
    return ok;
  };
  auto reply = [&](Reply r) -> asio::awaitable<bool> {
    r = shaped(api, std::move(r));
    out.status = r.status;
    const bool ok = co_await write(render_reply(r, req.request_id, req.keep_alive, false));
    co_return finish(ok);
  };

  json body = json::parse(req.http.body(), nullptr, false);
  if (body.is_discarded() || !body.is_object())
    co_return co_await reply(error_reply(400, "the request body is not a JSON object",
                                         "invalid_request_error", "invalid_json"));

  // Who is calling.
  {
    Caller caller = identify_caller(*st->tenants, req.http, req.request_id);
    if (caller.refusal) co_return co_await reply(std::move(*caller.refusal));
    tenant = std::move(caller.tenant);
    if (tenant) out.tenant = tenant->name();
  }

  // Which model version.
  std::string requested = "default";
  if (auto it = body.find("model"); it != body.end()) {
    if (!it->is_string())
      co_return co_await reply(error_reply(400, "'model' must be a string",
                                           "invalid_request_error", "invalid_model"));
    requested = it->get<std::string>();
  }
  // A model this tenant may not use is answered exactly like one that does not exist, so that
  // a key never learns which other models are served (the hidden-model-name rule; /v1/models
  // lists only the tenant's models too).
  VersionPool* vp = st->resolve(requested, gw.uniform());
  if (vp && tenant && !tenant->allows(requested, vp->model(), vp->key())) vp = nullptr;
  if (!vp)
    co_return co_await reply(error_reply(
        404, fmt::format("the model '{}' does not exist", requested), "invalid_request_error",
        "model_not_found"));
  out.model = vp->key();

  // Limits: one request and (prompt estimate + max_tokens) x n tokens, reserved up front.
  const double prompt_estimate =
      estimate_prompt_tokens(affinity_prefix(body, std::numeric_limits<size_t>::max()));
  double n = 1;
  if (auto it = body.find("n"); it != body.end() && it->is_number() && it->get<double>() >= 1)
    n = it->get<double>();
  if (tenant) {
    const double want =
        (prompt_estimate + requested_max_tokens(body, cfg.default_max_tokens)) * n;
    const Admission a = tenant->admit(want, Clock::now());
    if (!a.ok) {
      gw.metrics().inc("cadenza_gateway_rate_limited_total",
                       {{"tenant", out.tenant}, {"limit", a.limit}});
      if (a.retry_after_s < 0)
        co_return co_await reply(error_reply(
            429,
            fmt::format("the request needs about {:.0f} tokens, more than this key's {} limit "
                        "allows at once",
                        want, a.limit),
            "rate_limit_error", "rate_limit_exceeded"));
      Reply r = error_reply(
          429,
          fmt::format("rate limit reached for {} per minute; retry in {:.1f} s", a.limit,
                      a.retry_after_s),
          "rate_limit_error", "rate_limit_exceeded");
      r.headers.emplace_back("Retry-After",
                             std::to_string(static_cast<long>(std::ceil(a.retry_after_s))));
      co_return co_await reply(std::move(r));
    }
    reserved = want;
  }

  // The response cache.
  std::optional<std::string> key;
  // Responses are not cached: each has its own id, and a replica may store it.
  if (st->cache && req.route != "responses" && req.route != "count_tokens")
    key = cache_key(body, req.route, vp->key());
  if (key) {
    if (auto hit = st->cache->get(*key)) {
      gw.metrics().inc("cadenza_gateway_cache_hits_total", {});
      out.cache = "hit";
      const double u = usage_tokens(*hit);
      used = u >= 0 ? u : 0;
      Reply r;
      r.body = std::move(*hit);
      r.headers.emplace_back("X-Cache", "hit");
      co_return co_await reply(std::move(r));
    }
    gw.metrics().inc("cadenza_gateway_cache_misses_total", {});
    out.cache = "miss";
  }

  // Responses API: a request that continues a stored response goes to the replica that stored it
  // (each keeps its own, response_affinity.h); answers are remembered below.
  const bool tracks_responses =
      req.route == "responses" && vp->config().api == UpstreamApi::cadenza;
  std::optional<std::string> pinned;
  if (tracks_responses) {
    if (auto it = body.find("previous_response_id"); it != body.end() && it->is_string())
      if (auto home = gw.response_affinity().find(it->get<std::string>(), out.tenant))
        pinned = home->upstream;
  }
  auto remember_response = [&](std::string_view text, const std::string& upstream) {
    if (!tracks_responses) return false;
    auto id = find_response_id(text);
    if (id) gw.response_affinity().remember(*id, {upstream, vp->key()}, out.tenant);
    return id.has_value();
  };

  // The request the replicas get (ordered again: schemas keep the client's property order), in
  // their API (converted to Chat Completions for `api: chat` upstreams).
  auto ordered = nlohmann::ordered_json::parse(req.http.body(), nullptr, false);
  ordered["model"] = vp->config().upstream_model;
  std::string target(req.http.target());
  if (auto refused = shape.prepare(req.route, vp->config(), target, ordered))
    co_return co_await reply(std::move(*refused));
  UpstreamCall::Request ureq{req.http.method(), target, 11};
  ureq.set(http::field::content_type, "application/json");
  ureq.set(http::field::user_agent, "cadenza-gateway");
  ureq.set("X-Request-Id", req.request_id);
  if (auto it = req.http.find(http::field::accept); it != req.http.end())
    ureq.set(http::field::accept, it->value());
  if (!vp->config().api_key.empty())
    ureq.set(http::field::authorization, "Bearer " + vp->config().api_key);
  ureq.keep_alive(true);
  ureq.body() = ordered.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  ureq.prepare_payload();

  std::optional<uint64_t> prefix_hash;
  if (cfg.routing.prefix_affinity_chars > 0) {
    const std::string p =
        affinity_prefix(body, static_cast<size_t>(cfg.routing.prefix_affinity_chars));
    if (!p.empty()) prefix_hash = hash64(p);
  }

  // The replica is told the time the request has left (X-Request-Timeout, seconds), so that
  // it aborts the generation and frees its KV when the gateway would give up anyway: the
  // client's own X-Request-Timeout, capped by upstream_timeout_ms. The gateway waits a little
  // longer than a client's limit (kReplicaGrace) for the replica's 504 to come back. A
  // malformed client value is passed on as it is: the replica answers it 400.
  constexpr auto kReplicaGrace = std::chrono::seconds(1);
  auto deadline = started + std::chrono::milliseconds(cfg.upstream_timeout_ms);
  auto request_deadline = deadline;
  std::string raw_timeout;
  if (auto it = req.http.find("X-Request-Timeout"); it != req.http.end()) {
    raw_timeout = std::string(sv(it->value()));
    char* end = nullptr;
    const double t = std::strtod(raw_timeout.c_str(), &end);
    if (!raw_timeout.empty() && end == raw_timeout.c_str() + raw_timeout.size() &&
        std::isfinite(t) && t > 0) {
      if (t * 1000 < cfg.upstream_timeout_ms) {
        request_deadline = started + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(t));
        deadline = std::min(deadline, request_deadline + kReplicaGrace);
      }
      raw_timeout.clear();
    }
  }
  std::set<std::string> tried;
  std::optional<Reply> saved_error;  // the last retryable answer (5xx, 429) of a replica
  std::string tls_failure;           // the last TLS handshake failure, when that ended an attempt
  auto ex = gw.io().get_executor();
  for (int attempt = 0; attempt <= cfg.routing.max_retries; ++attempt) {
    auto set = vp->replicas();
    const auto now = Clock::now();
    std::vector<Candidate> cands;
    for (const auto& u : set->replicas)
      cands.push_back({u->outstanding.load(), u->eligible(now) && !tried.count(u->address())});
    Pick pick = pick_replica(set->ring, cands, prefix_hash,
                             cfg.routing.affinity_max_outstanding, gw.next_rotation());
    if (pinned) {
      // The replica holding the previous response, while it can take requests; else any (which
      // answers 404 for the unknown id, in the Responses shape).
      for (size_t i = 0; i < set->replicas.size(); ++i)
        if (set->replicas[i]->address() == *pinned && cands[i].eligible) pick.index = static_cast<int>(i);
    }
    if (pick.index < 0) break;
    auto up = set->replicas[static_cast<size_t>(pick.index)];
    tried.insert(up->address());
    if (attempt > 0) gw.metrics().inc("cadenza_gateway_retries_total", {{"upstream", up->address()}});
    out.attempts = attempt + 1;
    out.upstream = up->address();
    up->on_dispatch(now);
    Outstanding guard(up);
    UpstreamCall call(ex, up);
    // A replica the health check finds hung gives this attempt up at once (a retry elsewhere
    // while nothing reached the client, an error event on a started stream), instead of
    // holding it until the deadline.
    co_await call.watch_for_hang();
    ureq.set(http::field::host, up->address());
    const auto sent = Clock::now();
    if (!raw_timeout.empty()) {
      ureq.set("X-Request-Timeout", raw_timeout);
    } else {
      const double left = std::chrono::duration<double>(request_deadline - sent).count();
      if (left <= 0) break;  // out of time: no further attempt
      ureq.set("X-Request-Timeout", fmt::format("{:.3f}", left));
    }
    CallError err = co_await call.start(ureq, deadline,
                                        std::chrono::milliseconds(cfg.connect_timeout_ms));
    auto fail = [&](const std::string& what) {
      gw.metrics().inc("cadenza_gateway_upstream_requests_total",
                       {{"upstream", up->address()}, {"outcome", what}});
      if (up->on_failure(Clock::now(), st->breaker)) {
        gw.metrics().inc("cadenza_gateway_upstream_ejections_total", {{"upstream", up->address()}});
        spdlog::warn("gateway: upstream {} ejected after failures (last: {})", up->address(),
                     what);
      }
    };
    if (err != CallError::none) {
      fail(to_string(err));
      if (err == CallError::tls) {
        tls_failure = fmt::format("TLS to the replica {} failed: {}", up->address(),
                                  call.error_text());
        spdlog::warn("[{}] gateway: {}", req.request_id, tls_failure);
      }
      continue;
    }
    gw.metrics().observe("cadenza_gateway_upstream_latency_seconds",
                         {{"upstream", up->address()}},
                         std::chrono::duration<double>(Clock::now() - sent).count());
    const int status = call.status();
    const bool streamed = status == 200 && is_event_stream(call.headers());
    if (!streamed) {
      std::string ubody;
      err = co_await call.read_all(ubody, cfg.max_body_bytes, deadline);
      if (err != CallError::none) {
        fail(to_string(err));
        continue;
      }
      Reply r;
      r.status = status;
      r.body = std::move(ubody);
      if (auto it = call.headers().find(http::field::content_type); it != call.headers().end())
        r.content_type = sv(it->value());
      if (auto it = call.headers().find(http::field::retry_after); it != call.headers().end())
        r.headers.emplace_back("Retry-After", sv(it->value()));
      r.headers.emplace_back("X-Cadenza-Upstream", up->address());
      call.finish();
      // 504 is the replica's answer to the request's own time limit (above): the replica is
      // healthy and no other one could answer in time.
      if ((status >= 500 && status != 504) || status == 429) {
        // The replica is failing (5xx) or full (429): try another one.
        if (status >= 500) {
          fail(std::to_string(status));
        } else {
          up->on_success();  // alive, only full (this also ends a half-open probe)
          gw.metrics().inc("cadenza_gateway_upstream_requests_total",
                           {{"upstream", up->address()}, {"outcome", "429"}});
        }
        saved_error = std::move(r);
        continue;
      }
      up->on_success();
      gw.metrics().inc("cadenza_gateway_upstream_requests_total",
                       {{"upstream", up->address()}, {"outcome", std::to_string(status)}});
      r = shape.finish_reply(std::move(r));
      if (status == 200) remember_response(r.body, up->address());
      if (status == 200) {
        const double u = usage_tokens(r.body);
        used = u >= 0 ? u : reserved;
        if (key && r.body.size() <= cfg.cache.max_entry_bytes) {
          st->cache->put(*key, r.body);
          gw.metrics().inc("cadenza_gateway_cache_stores_total", {});
        }
      }
      co_return co_await reply(std::move(r));
    }

    // A stream: the head goes to the client with the first piece, so that a replica failing
    // before its first byte is still retried elsewhere.
    std::string piece;
    err = co_await call.read_piece(piece, deadline);
    if (err != CallError::none) {
      fail(to_string(err));
      continue;
    }
    out.status = 200;
    UsageScanner usage;
    std::string bytes = render_stream_head(req.request_id, up->address(), req.keep_alive);
    // The id is in the first event (response.created); a piece may end inside it, so the scan
    // looks at what came so far, up to a bound.
    std::string head_of_stream;
    bool id_seen = !tracks_responses;
    while (!piece.empty()) {
      usage.feed(piece);
      if (!id_seen) {
        head_of_stream += piece;
        id_seen = remember_response(head_of_stream, up->address()) || head_of_stream.size() > 65536;
      }
      if (const std::string client_bytes = shape.stream_piece(piece); !client_bytes.empty())
        bytes += wire::http_chunk(client_bytes);
      if (!co_await write(std::move(bytes))) {
        // The client went away: closing the upstream connection makes the replica abort.
        call.abandon();
        out.status = 499;
        used = usage.tokens(prompt_estimate);
        finish(false);
        co_return false;
      }
      bytes.clear();
      err = co_await call.read_piece(piece, deadline);
      if (err != CallError::none) break;
    }
    used = usage.tokens(prompt_estimate);
    if (err != CallError::none) {
      // Broke after it started: an error event, then [DONE]; never silence.
      fail(to_string(err));
      gw.metrics().inc("cadenza_gateway_stream_errors_total", {{"upstream", up->address()}});
      bytes += wire::http_chunk(shape.stream_broken(
          fmt::format("the upstream replica failed mid-stream ({})", to_string(err))));
      out.status = 200;
    } else {
      up->on_success();
      gw.metrics().inc("cadenza_gateway_upstream_requests_total",
                       {{"upstream", up->address()}, {"outcome", "200"}});
      call.finish();
      if (const std::string tail = shape.stream_end(); !tail.empty()) bytes += wire::http_chunk(tail);
    }
    bytes += wire::kLastChunk;
    const bool ok = co_await write(std::move(bytes));
    co_return finish(ok);
  }
  used = 0;
  if (saved_error) co_return co_await reply(std::move(*saved_error));
  if (!tls_failure.empty())
    co_return co_await reply(error_reply(502, tls_failure, "server_error", "upstream_tls_error"));
  co_return co_await reply(error_reply(
      503,
      fmt::format("no replica of '{}' could take the request ({} tried)", vp->key(),
                  tried.size()),
      "service_unavailable", "no_healthy_upstream"));
}

template asio::awaitable<bool> proxy_generation(Gateway&, beast::tcp_stream&,
                                                const ClientRequest&);
template asio::awaitable<bool> proxy_generation(Gateway&, beast::ssl_stream<beast::tcp_stream>&,
                                                const ClientRequest&);

}  // namespace cadenza::gateway
