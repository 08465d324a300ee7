// Asynchronous HTTP/1.1 client for streamed POSTs (Boost.Beast on an Asio io_context, C++20
// coroutines). Keeps idle keep-alive connections in a pool and reuses them; one io_context thread
// drives any number of concurrent requests.
//
// Contract: an HttpClient and everything it returns are used from the io_context's thread only.
// Plain http:// only (no TLS): the load generator talks to servers on the local network.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>  // std::exchange, used by asio/awaitable.hpp without including it
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include "loadgen/openai_api.h"
#include "util/result.h"

namespace cadenza::loadgen {

struct Endpoint {
  std::string host;
  std::string port;    // "80" when the URL has none
  std::string target;  // request path, e.g. "/v1/chat/completions"
};

// http://HOST[:PORT][/PATH]. An empty PATH or "/" gets /v1/chat/completions or /v1/completions;
// a PATH ending in "/v1" gets "/chat/completions" or "/completions" appended; any other PATH is
// used as given. Errors: other schemes (https), no host, a bad port.
Result<Endpoint> parse_url(std::string_view url, ApiKind api);

// Why a request failed. `none` is success.
enum class ErrorKind { none, connect, http_status, timeout, closed, malformed, server_error };
const char* to_string(ErrorKind kind);

struct HttpOutcome {
  ErrorKind error = ErrorKind::none;  // connect, http_status, timeout or closed (or none)
  int status = 0;                     // HTTP status when a header arrived
  std::string message;                // for humans; for http_status, the start of the body
};

class HttpClient {
 public:
  // api_key: sent as "Authorization: Bearer KEY" when non-empty.
  HttpClient(boost::asio::io_context& io, Endpoint endpoint, std::string api_key);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // POSTs `body` (application/json) and streams the response body of a 200 response to
  // `on_data` piece by piece as it arrives (chunked transfer decoding done). on_data returns
  // false to abandon the request (its connection is closed; the outcome is then `none` and the
  // caller knows why). Everything, connecting included, must finish by `deadline`. A reused
  // connection that the server had closed is retried once on a new one.
  boost::asio::awaitable<HttpOutcome> post(std::string body,
                                           std::chrono::steady_clock::time_point deadline,
                                           std::function<bool(std::string_view)> on_data);

  // GETs `target` (e.g. "/metrics") on a connection of its own, closed afterwards (the pool and
  // connections_opened() are untouched), and returns the whole body of a 200 response (at most
  // 16 MiB). Errors (outcome.error != none): connect, timeout, closed (also a body over the
  // limit), http_status (with the start of the body in the message).
  boost::asio::awaitable<std::pair<HttpOutcome, std::string>> get(
      std::string target, std::chrono::steady_clock::time_point deadline);

  size_t connections_opened() const { return opened_; }

 private:
  using Stream = boost::beast::tcp_stream;
  boost::asio::io_context& io_;
  Endpoint ep_;
  std::string auth_;
  std::vector<std::unique_ptr<Stream>> idle_;
  std::vector<boost::asio::ip::tcp::endpoint> resolved_;
  size_t opened_ = 0;
};

}  // namespace cadenza::loadgen
