// One connection to a replica: plain TCP, or TLS over TCP for an `https://` upstream
// (upstream_tls.h makes the context). UpstreamCall reads and writes through visit(), which hands
// the HTTP code whichever stream this is; timeouts and close go to the TCP layer underneath.
// Ownership: holds a reference to the TLS context for as long as the connection lives (idle
// connections kept by an Upstream included). Thread-safety: none (one coroutine at a time).
#pragma once

#include <memory>
#include <utility>  // std::exchange, used by asio/awaitable.hpp without including it

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

namespace cadenza::gateway {

class UpstreamStream {
 public:
  using Tls = boost::beast::ssl_stream<boost::beast::tcp_stream>;
  // `tls_ctx` null: plain TCP.
  UpstreamStream(boost::asio::any_io_executor ex, std::shared_ptr<boost::asio::ssl::context> tls_ctx)
      : tls_ctx_(std::move(tls_ctx)) {
    if (tls_ctx_)
      tls_ = std::make_unique<Tls>(ex, *tls_ctx_);
    else
      plain_ = std::make_unique<boost::beast::tcp_stream>(ex);
  }
  bool tls() const { return tls_ != nullptr; }
  Tls& tls_stream() { return *tls_; }
  boost::beast::tcp_stream& tcp() { return tls_ ? tls_->next_layer() : *plain_; }
  // f(stream) for the stream to speak HTTP on; both branches must return the same type.
  template <typename F>
  auto visit(F&& f) {
    return tls_ ? f(*tls_) : f(*plain_);
  }

 private:
  std::shared_ptr<boost::asio::ssl::context> tls_ctx_;  // outlives tls_ (declared first)
  std::unique_ptr<boost::beast::tcp_stream> plain_;
  std::unique_ptr<Tls> tls_;
};

}  // namespace cadenza::gateway
