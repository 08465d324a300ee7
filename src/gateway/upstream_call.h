// One HTTP/1.1 exchange with a replica (C++20 coroutines on Boost.Beast): take an idle keep-alive
// connection or connect, send the request, read the response header; then read the body piece by
// piece (chunked decoding done), so the caller can forward each piece before reading the next
// (that is the backpressure: at most one piece is held per stream).
//
// Contract: one coroutine uses an UpstreamCall at a time; the Upstream outlives it (the caller
// holds a shared_ptr). After a complete body with keep-alive the connection goes back to the
// Upstream's idle list (finish()); otherwise it is closed.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <utility>  // std::exchange, used by asio/awaitable.hpp without including it

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "gateway/upstream.h"

namespace cadenza::gateway {

// tls: the TLS handshake failed (certificate not trusted, wrong name, client certificate
// refused...); error_text() says why.
enum class CallError { none, connect, send, header, body, timeout, tls };
const char* to_string(CallError e);

class UpstreamCall {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  UpstreamCall(boost::asio::any_io_executor ex, std::shared_ptr<Upstream> up);
  ~UpstreamCall();

  // From now on the call gives up (CallError::timeout, the connection closed) within
  // kHangPoll of the active check finding the replica hung (Upstream::hung_epoch moves), in
  // start() and read_piece() alike. Must be called from the coroutine that runs the call, on a
  // strand (a timer handler shares its executor), before start().
  boost::asio::awaitable<void> watch_for_hang();
  static constexpr std::chrono::milliseconds kHangPoll{200};

  // Sends `req` and reads the response header. A reused connection that the replica had closed
  // is retried once on a fresh one.
  boost::asio::awaitable<CallError> start(const Request& req, Clock::time_point deadline,
                                          std::chrono::milliseconds connect_timeout);
  int status() const;
  const boost::beast::http::fields& headers() const;
  bool body_done() const;

  // Reads the next body bytes into `out` (replacing its contents; at most kPiece bytes).
  // Returns none with an empty `out` at the end of the body.
  boost::asio::awaitable<CallError> read_piece(std::string& out, Clock::time_point deadline);
  // Reads the whole body (at most `limit` bytes; more is an error).
  boost::asio::awaitable<CallError> read_all(std::string& out, size_t limit,
                                             Clock::time_point deadline);

  // Returns the connection to the idle pool when the exchange completed and allows keep-alive;
  // closes it otherwise. Called once at the end; the destructor closes it if finish() was not.
  void finish();
  void abandon();  // closes the connection now (the replica sees the client go away)
  // Why the last start() failed in TLS (OpenSSL's reason); empty otherwise.
  const std::string& error_text() const { return error_text_; }

  static constexpr size_t kPiece = 16384;

 private:
  struct HangWatch;
  static void arm_watch(std::shared_ptr<HangWatch> w, std::shared_ptr<Upstream> up);
  bool hung() const;
  void watching();     // points the watch at the current connection
  void drop_stream();  // closes the connection (and tells the watch)

  boost::asio::any_io_executor ex_;
  std::shared_ptr<Upstream> up_;
  std::shared_ptr<HangWatch> watch_;  // null unless watch_for_hang()
  std::unique_ptr<UpstreamStream> stream_;
  std::string error_text_;
  boost::beast::flat_buffer buf_;
  std::unique_ptr<boost::beast::http::response_parser<boost::beast::http::buffer_body>> parser_;
};

}  // namespace cadenza::gateway
