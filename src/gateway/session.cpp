#include "gateway/session.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gateway/admin.h"
#include "gateway/auth.h"
#include "gateway/gateway.h"
#include "gateway/proxy.h"
#include "gateway/responses.h"
#include "gateway/stored_responses.h"
#include "webui/webui.h"
#include "wire/process_metrics.h"

namespace cadenza::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kIdleTimeout = std::chrono::seconds(120);
constexpr auto kHandshakeTimeout = std::chrono::seconds(30);
constexpr auto kCloseTimeout = std::chrono::seconds(5);

// Is some version of some model able to take a request now?
bool any_ready(const GatewayState& st) {
  const auto now = Clock::now();
  for (const auto& [name, pool] : st.models)
    for (const auto& v : pool->versions)
      for (const auto& u : v->replicas()->replicas)
        if (u->eligible(now)) return true;
  return false;
}

Reply models_reply(const GatewayState& st, const Tenant* tenant) {
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (const auto& id : st.model_ids(tenant))
    data.push_back({{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "cadenza"}});
  Reply r;
  nlohmann::ordered_json list;
  list["object"] = "list";
  list["data"] = std::move(data);
  r.body = list.dump();
  return r;
}

}  // namespace

namespace {

// The HTTP/1.1 request loop over a plain or TLS stream.
template <typename Stream>
asio::awaitable<void> serve_http(Gateway& gw, Stream& stream) {
  auto& tcp_layer = beast::get_lowest_layer(stream);
  beast::flat_buffer buf;
  error_code ec;
  for (;;) {
    size_t max_body = 0, max_header = 0;
    {
      const auto limits = gw.state();  // not held while the connection idles (reloads)
      max_body = limits->config.max_body_bytes;
      max_header = limits->config.max_header_bytes;
    }
    http::request_parser<http::string_body> parser;
    parser.body_limit(max_body);
    parser.header_limit(static_cast<uint32_t>(max_header));
    tcp_layer.expires_after(kIdleTimeout);
    co_await http::async_read_header(stream, buf, parser,
                                     asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) {
      const auto& h = parser.get();
      auto expect = h.find(http::field::expect);
      if (expect != h.end() && beast::iequals(expect->value(), "100-continue") &&
          !parser.is_done()) {
        static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        co_await asio::async_write(stream, asio::buffer(kContinue),
                                   asio::redirect_error(asio::use_awaitable, ec));
      }
    }
    if (!ec)
      co_await http::async_read(stream, buf, parser,
                                asio::redirect_error(asio::use_awaitable, ec));
    tcp_layer.expires_never();
    const std::string request_id = new_request_id();
    if (ec) {
      if (ec == http::error::end_of_stream || ec == asio::error::eof ||
          ec == beast::error::timeout || ec == asio::error::connection_reset ||
          ec == asio::error::operation_aborted)
        break;
      // Over a limit: the OpenAI error shape with 413 (body) or 431 (start line and headers),
      // then the connection closes (the rest of the request is not read).
      Reply r = ec == http::error::body_limit
                    ? error_reply(413,
                                  fmt::format("the request body is larger than {} bytes", max_body),
                                  "invalid_request_error", "request_too_large")
                : ec == http::error::header_limit
                    ? error_reply(431,
                                  fmt::format("the request headers are larger than {} bytes",
                                              max_header),
                                  "invalid_request_error", "request_headers_too_large")
                    : error_reply(400, fmt::format("malformed HTTP request: {}", ec.message()),
                                  "invalid_request_error", "bad_request");
      co_await asio::async_write(stream, asio::buffer(render_reply(r, request_id, false, false)),
                                 asio::redirect_error(asio::use_awaitable, ec));
      break;
    }
    http::request<http::string_body> req = parser.release();
    ClientRequest cr{req, "", request_id, req.keep_alive()};
    if (auto it = req.find("X-Request-Id");
        it != req.end() && acceptable_request_id({it->value().data(), it->value().size()}))
      cr.request_id = std::string(it->value());

    std::string target(req.target());
    if (auto q = target.find('?'); q != std::string::npos) target.resize(q);
    const bool get = req.method() == http::verb::get || req.method() == http::verb::head;
    const bool post = req.method() == http::verb::post;
    bool keep = cr.keep_alive;
    const char* generation_route = target == "/v1/chat/completions"         ? "chat"
                                   : target == "/v1/completions"            ? "completions"
                                   : target == "/v1/messages"               ? "messages"
                                   : target == "/v1/messages/count_tokens"  ? "count_tokens"
                                   : target == "/v1/responses"              ? "responses"
                                                                            : nullptr;
    if (post && generation_route) {
      cr.route = generation_route;
      keep = co_await proxy_generation(gw, stream, cr) && keep;
    } else {
      Reply r;
      std::string route = "other";
      auto st = gw.state();
      if (gw.webui() && webui::is_console_path(target)) {
        route = "webui";
        const auto inm = req.find(http::field::if_none_match);
        webui::Response w = webui::serve(
            {req.method_string().data(), req.method_string().size()}, target,
            inm == req.end() ? std::string_view{}
                             : std::string_view{inm->value().data(), inm->value().size()});
        r = Reply{w.status, std::move(w.content_type), std::string(w.body), std::move(w.headers)};
      } else if (get && target == "/health") {
        route = "health";
        r.body = R"({"status":"ok"})";
      } else if (get && target == "/ready") {
        route = "ready";
        r = any_ready(*st) ? Reply{200, "application/json", R"({"status":"ready"})", {}}
                           : error_reply(503, "no upstream replica is ready",
                                         "service_unavailable", "not_ready");
      } else if (get && target == "/metrics") {
        route = "metrics";
        r.content_type = "text/plain; version=0.0.4";
        r.body = gw.metrics().render();
        wire::append_process_metrics(r.body);
      } else if (get && (target == "/v1/models")) {
        route = "models";
        Caller caller = identify_caller(*st->tenants, req, cr.request_id);
        r = caller.refusal ? std::move(*caller.refusal) : models_reply(*st, caller.tenant.get());
      } else if (is_stored_response_route(target)) {
        route = "responses_stored";
        r = co_await stored_response_reply(gw, req, target, cr.request_id);
      } else if (is_admin_route(target)) {
        route = "admin";
        r = admin_reply(gw, req, target, cr.request_id);
      } else if (generation_route || target == "/health" || target == "/ready" || target == "/metrics" ||
                 target == "/v1/models") {
        r = error_reply(405, fmt::format("method {} not allowed on {}",
                                         std::string(req.method_string()), target),
                        "invalid_request_error", "method_not_allowed");
      } else {
        r = error_reply(404, fmt::format("no route {}", target), "invalid_request_error",
                        "not_found");
      }
      gw.metrics().inc("cadenza_gateway_requests_total",
                       {{"route", route}, {"tenant", "-"}, {"model", "-"},
                        {"status", std::to_string(r.status)}});
      co_await asio::async_write(
          stream,
          asio::buffer(render_reply(r, cr.request_id, keep, req.method() == http::verb::head)),
          asio::redirect_error(asio::use_awaitable, ec));
      if (ec) keep = false;
    }
    if (!keep) break;
  }
}

}  // namespace

asio::awaitable<void> serve_connection(Gateway& gw, tcp::socket socket,
                                       std::shared_ptr<asio::ssl::context> tls) {
  error_code ec;
  if (!tls) {
    beast::tcp_stream stream(std::move(socket));
    co_await serve_http(gw, stream);
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream.close();
    co_return;
  }
  beast::ssl_stream<beast::tcp_stream> stream(std::move(socket), *tls);
  auto& lowest = beast::get_lowest_layer(stream);
  lowest.expires_after(kHandshakeTimeout);
  co_await stream.async_handshake(asio::ssl::stream_base::server,
                                  asio::redirect_error(asio::use_awaitable, ec));
  if (!ec) {
    lowest.expires_never();
    co_await serve_http(gw, stream);
    // close_notify, bounded: a client that stopped reading must not keep the coroutine.
    lowest.expires_after(kCloseTimeout);
    co_await stream.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
  }
  lowest.close();
}

}  // namespace cadenza::gateway
