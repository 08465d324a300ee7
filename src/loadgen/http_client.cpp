#include "loadgen/http_client.h"

#include <charconv>
#include <cstdint>
#include <limits>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace cadenza::loadgen {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

Result<Endpoint> parse_url(std::string_view url, ApiKind api) {
  constexpr std::string_view scheme = "http://";
  if (url.substr(0, scheme.size()) != scheme)
    return make_error("{}: only http:// URLs are supported", url);
  std::string_view rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string path(slash == std::string_view::npos ? std::string_view() : rest.substr(slash));
  Endpoint ep;
  ep.port = "80";
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return make_error("{}: bad IPv6 address", url);
    ep.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority.front() != ':') return make_error("{}: bad host", url);
    if (!authority.empty()) ep.port = std::string(authority.substr(1));
  } else {
    const size_t colon = authority.rfind(':');
    ep.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) ep.port = std::string(authority.substr(colon + 1));
  }
  if (ep.host.empty()) return make_error("{}: no host", url);
  unsigned port = 0;
  auto [p, ec] = std::from_chars(ep.port.data(), ep.port.data() + ep.port.size(), port);
  if (ec != std::errc() || p != ep.port.data() + ep.port.size() || port == 0 || port > 65535)
    return make_error("{}: bad port '{}'", url, ep.port);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const char* tail = api == ApiKind::chat ? "/chat/completions" : "/completions";
  if (path.empty() || path == "/")
    ep.target = std::string("/v1") + tail;
  else if (path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0)
    ep.target = path + tail;
  else
    ep.target = path;
  return ep;
}

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::none:
      return "none";
    case ErrorKind::connect:
      return "connect";
    case ErrorKind::http_status:
      return "http_status";
    case ErrorKind::timeout:
      return "timeout";
    case ErrorKind::closed:
      return "closed";
    case ErrorKind::malformed:
      return "malformed";
    case ErrorKind::server_error:
      return "server_error";
  }
  return "unknown";
}

HttpClient::HttpClient(asio::io_context& io, Endpoint endpoint, std::string api_key)
    : io_(io), ep_(std::move(endpoint)) {
  if (!api_key.empty()) auth_ = "Bearer " + api_key;
}

HttpClient::~HttpClient() = default;

namespace {

bool is_timeout(const error_code& ec) {
  return ec == beast::error::timeout || ec == asio::error::timed_out;
}

// Errors that mean "the server closed this (idle) connection before answering".
bool is_stale(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == http::error::partial_message;
}

}  // namespace

asio::awaitable<HttpOutcome> HttpClient::post(std::string body,
                                              std::chrono::steady_clock::time_point deadline,
                                              std::function<bool(std::string_view)> on_data) {
  http::request<http::string_body> req{http::verb::post, ep_.target, 11};
  req.set(http::field::host, ep_.host + ":" + ep_.port);
  req.set(http::field::user_agent, "cadenza-bench-serve");
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  if (!auth_.empty()) req.set(http::field::authorization, auth_);
  req.keep_alive(true);
  req.body() = std::move(body);
  req.prepare_payload();

  error_code ec;
  if (resolved_.empty()) {
    asio::ip::tcp::resolver resolver(io_);
    auto results = co_await resolver.async_resolve(ep_.host, ep_.port,
                                                   asio::redirect_error(asio::use_awaitable, ec));
    if (ec)
      co_return HttpOutcome{ErrorKind::connect, 0, "resolve " + ep_.host + ": " + ec.message()};
    // Requests started together may all resolve; the first answer is kept.
    if (resolved_.empty())
      for (const auto& r : results) resolved_.push_back(r.endpoint());
  }

  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Stream> s;
    bool reused = false;
    if (!idle_.empty() && attempt == 0) {
      s = std::move(idle_.back());
      idle_.pop_back();
      reused = true;
    } else {
      s = std::make_unique<Stream>(io_);
      s->expires_at(deadline);
      co_await s->async_connect(resolved_, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        co_return HttpOutcome{is_timeout(ec) ? ErrorKind::timeout : ErrorKind::connect, 0,
                              "connect " + ep_.host + ":" + ep_.port + ": " + ec.message()};
      }
      ++opened_;
      // Requests go out at once instead of waiting on Nagle's algorithm for an ACK.
      s->socket().set_option(asio::ip::tcp::no_delay(true), ec);
    }
    s->expires_at(deadline);
    co_await http::async_write(*s, req, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (reused && !is_timeout(ec)) continue;
      co_return HttpOutcome{is_timeout(ec) ? ErrorKind::timeout : ErrorKind::closed, 0,
                            "write: " + ec.message()};
    }
    beast::flat_buffer buf;
    http::response_parser<http::buffer_body> parser;
    // Not boost::none: Beast 1.74 compares Content-Length against the optional limit and an empty
    // optional compares less than every length, so a sized body would fail with body_limit.
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    s->expires_at(deadline);
    co_await http::async_read_header(*s, buf, parser,
                                     asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (reused && !parser.got_some() && is_stale(ec)) continue;
      co_return HttpOutcome{is_timeout(ec) ? ErrorKind::timeout : ErrorKind::closed, 0,
                            "reading the response header: " + ec.message()};
    }
    HttpOutcome out;
    out.status = static_cast<int>(parser.get().result_int());
    const bool ok_status = out.status == 200;
    std::string error_body;
    char piece[16384];
    bool abandoned = false;
    while (!parser.is_done()) {
      parser.get().body().data = piece;
      parser.get().body().size = sizeof piece;
      s->expires_at(deadline);
      co_await http::async_read_some(*s, buf, parser,
                                     asio::redirect_error(asio::use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      const size_t n = sizeof piece - parser.get().body().size;
      if (n > 0) {
        if (ok_status) {
          if (!on_data(std::string_view(piece, n))) {
            abandoned = true;
            break;
          }
        } else if (error_body.size() < 4096) {
          error_body.append(piece, std::min(n, 4096 - error_body.size()));
        }
      }
      if (ec) {
        out.error = is_timeout(ec) ? ErrorKind::timeout : ErrorKind::closed;
        out.message = (is_timeout(ec) ? "timed out" : "connection closed") +
                      std::string(" in the response body: ") + ec.message();
        co_return out;
      }
    }
    if (!ok_status) {
      out.error = ErrorKind::http_status;
      out.message = "HTTP " + std::to_string(out.status) + ": " + error_body;
    }
    if (!abandoned && parser.is_done() && parser.keep_alive()) {
      s->expires_never();
      idle_.push_back(std::move(s));
    }
    co_return out;
  }
}

asio::awaitable<std::pair<HttpOutcome, std::string>> HttpClient::get(
    std::string target, std::chrono::steady_clock::time_point deadline) {
  using Reply = std::pair<HttpOutcome, std::string>;
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, ep_.host + ":" + ep_.port);
  req.set(http::field::user_agent, "cadenza-bench-serve");
  if (!auth_.empty()) req.set(http::field::authorization, auth_);
  req.keep_alive(false);
  error_code ec;
  asio::ip::tcp::resolver resolver(io_);
  auto results = co_await resolver.async_resolve(ep_.host, ep_.port,
                                                 asio::redirect_error(asio::use_awaitable, ec));
  if (ec)
    co_return Reply{HttpOutcome{ErrorKind::connect, 0, "resolve " + ep_.host + ": " + ec.message()},
                    {}};
  Stream s(io_);
  s.expires_at(deadline);
  co_await s.async_connect(results, asio::redirect_error(asio::use_awaitable, ec));
  if (ec)
    co_return Reply{HttpOutcome{is_timeout(ec) ? ErrorKind::timeout : ErrorKind::connect, 0,
                                "connect " + ep_.host + ":" + ep_.port + ": " + ec.message()},
                    {}};
  s.expires_at(deadline);
  co_await http::async_write(s, req, asio::redirect_error(asio::use_awaitable, ec));
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::uint64_t{16} << 20);
  if (!ec) {
    s.expires_at(deadline);
    co_await http::async_read(s, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
  }
  if (ec)
    co_return Reply{HttpOutcome{is_timeout(ec) ? ErrorKind::timeout : ErrorKind::closed,
                                parser.is_header_done()
                                    ? static_cast<int>(parser.get().result_int())
                                    : 0,
                                "GET " + target + ": " + ec.message()},
                    {}};
  error_code ignored;
  s.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  HttpOutcome out;
  out.status = static_cast<int>(parser.get().result_int());
  std::string body = std::move(parser.get().body());
  if (out.status != 200) {
    out.error = ErrorKind::http_status;
    out.message = "HTTP " + std::to_string(out.status) + ": " + body.substr(0, 200);
    body.clear();
  }
  co_return Reply{std::move(out), std::move(body)};
}

}  // namespace cadenza::loadgen
