#include "gateway/upstream_call.h"

#include <limits>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "gateway/upstream_tls.h"

namespace cadenza::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

const char* to_string(CallError e) {
  switch (e) {
    case CallError::none:
      return "none";
    case CallError::connect:
      return "connect_error";
    case CallError::send:
      return "send_error";
    case CallError::header:
      return "header_error";
    case CallError::body:
      return "body_error";
    case CallError::timeout:
      return "timeout";
    case CallError::tls:
      return "tls_error";
  }
  return "error";
}

namespace {

bool is_timeout(const error_code& ec) {
  return ec == beast::error::timeout || ec == asio::error::timed_out;
}

// "The replica closed this idle connection before answering."
bool is_stale(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == http::error::partial_message;
}

}  // namespace

// What a hang watch's timer handler shares with its call. The handler may run after the call is
// gone (cancelling a timer only queues it), so it holds this, never the call. Touched only on
// the call's strand.
struct UpstreamCall::HangWatch {
  explicit HangWatch(asio::any_io_executor ex) : timer(std::move(ex)) {}
  asio::steady_timer timer;
  uint64_t epoch = 0;                // Upstream::hung_epoch when the watch began
  bool fired = false;                // the replica was found hung since
  UpstreamStream* stream = nullptr;  // the connection being waited on (null: none)
};

UpstreamCall::UpstreamCall(asio::any_io_executor ex, std::shared_ptr<Upstream> up)
    : ex_(std::move(ex)), up_(std::move(up)) {}

UpstreamCall::~UpstreamCall() {
  abandon();
  if (watch_) watch_->timer.cancel();
}

asio::awaitable<void> UpstreamCall::watch_for_hang() {
  watch_ = std::make_shared<HangWatch>(co_await asio::this_coro::executor);
  watch_->epoch = up_->hung_epoch.load();
  arm_watch(watch_, up_);
}

void UpstreamCall::arm_watch(std::shared_ptr<HangWatch> w, std::shared_ptr<Upstream> up) {
  w->timer.expires_after(kHangPoll);
  w->timer.async_wait([w, up](error_code ec) {
    if (ec) return;  // cancelled: the call is over
    if (up->hung_epoch.load() == w->epoch) {
      arm_watch(w, up);
      return;
    }
    w->fired = true;
    if (w->stream) w->stream->tcp().cancel();  // the pending read ends with operation_aborted
  });
}

bool UpstreamCall::hung() const { return watch_ && watch_->fired; }

void UpstreamCall::watching() {
  if (watch_) watch_->stream = stream_.get();
}

void UpstreamCall::drop_stream() {
  stream_.reset();
  watching();
}

asio::awaitable<CallError> UpstreamCall::start(const Request& req, Clock::time_point deadline,
                                               std::chrono::milliseconds connect_timeout) {
  error_code ec;
  error_text_.clear();
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (hung()) {
      drop_stream();
      co_return CallError::timeout;
    }
    bool reused = false;
    if (attempt == 0) stream_ = up_->take_idle();
    watching();
    if (stream_) {
      reused = true;
    } else {
      const UpstreamTls* tls = up_->tls();
      stream_ = std::make_unique<UpstreamStream>(ex_, tls ? tls->ctx : nullptr);
      watching();
      auto& tcp = stream_->tcp();
      tcp.expires_at(std::min(deadline, Clock::now() + connect_timeout));
      co_await tcp.async_connect(up_->endpoint(), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        drop_stream();
        co_return is_timeout(ec) || hung() ? CallError::timeout : CallError::connect;
      }
      tcp.socket().set_option(asio::ip::tcp::no_delay(true), ec);
      if (tls) {
        // The handshake shares the connect timeout: a replica that accepts but never answers
        // TLS is as dead as one that does not accept.
        if (auto s = prepare_tls_connection(stream_->tls_stream(), tls->server_name, tls->verify);
            !s) {
          error_text_ = s.error();
          drop_stream();
          co_return CallError::tls;
        }
        co_await stream_->tls_stream().async_handshake(
            asio::ssl::stream_base::client, asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
          error_text_ = is_timeout(ec) ? "the TLS handshake timed out" : tls_error_text(ec);
          drop_stream();
          co_return CallError::tls;
        }
      }
    }
    stream_->tcp().expires_at(deadline);
    co_await stream_->visit([&](auto& s) {
      return http::async_write(s, req, asio::redirect_error(asio::use_awaitable, ec));
    });
    if (ec) {
      drop_stream();
      if (reused && !is_timeout(ec)) continue;
      co_return is_timeout(ec) || hung() ? CallError::timeout : CallError::send;
    }
    buf_.clear();
    parser_ = std::make_unique<http::response_parser<http::buffer_body>>();
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    co_await stream_->visit([&](auto& s) {
      return http::async_read_header(s, buf_, *parser_,
                                     asio::redirect_error(asio::use_awaitable, ec));
    });
    if (ec) {
      const bool stale = reused && !parser_->got_some() && is_stale(ec);
      drop_stream();
      parser_.reset();
      if (stale) continue;
      co_return is_timeout(ec) || hung() ? CallError::timeout : CallError::header;
    }
    co_return CallError::none;
  }
  co_return CallError::connect;
}

int UpstreamCall::status() const { return parser_ ? static_cast<int>(parser_->get().result_int()) : 0; }

const http::fields& UpstreamCall::headers() const { return parser_->get().base(); }

bool UpstreamCall::body_done() const { return parser_ && parser_->is_done(); }

asio::awaitable<CallError> UpstreamCall::read_piece(std::string& out, Clock::time_point deadline) {
  out.clear();
  if (!parser_ || !stream_) co_return CallError::body;
  if (hung()) co_return CallError::timeout;
  out.resize(kPiece);
  while (!parser_->is_done()) {
    parser_->get().body().data = out.data();
    parser_->get().body().size = out.size();
    stream_->tcp().expires_at(deadline);
    error_code ec;
    co_await stream_->visit([&](auto& s) {
      return http::async_read_some(s, buf_, *parser_,
                                   asio::redirect_error(asio::use_awaitable, ec));
    });
    if (ec == http::error::need_buffer) ec = {};
    const size_t n = out.size() - parser_->get().body().size;
    if (ec) {
      out.clear();
      co_return is_timeout(ec) || hung() ? CallError::timeout : CallError::body;
    }
    if (n > 0) {
      out.resize(n);
      co_return CallError::none;
    }
  }
  out.clear();
  co_return CallError::none;
}

asio::awaitable<CallError> UpstreamCall::read_all(std::string& out, size_t limit,
                                                  Clock::time_point deadline) {
  out.clear();
  std::string piece;
  for (;;) {
    const CallError e = co_await read_piece(piece, deadline);
    if (e != CallError::none) co_return e;
    if (piece.empty()) co_return CallError::none;
    if (out.size() + piece.size() > limit) co_return CallError::body;
    out += piece;
  }
}

void UpstreamCall::finish() {
  if (stream_ && parser_ && parser_->is_done() && parser_->keep_alive()) {
    stream_->tcp().expires_never();
    up_->put_idle(std::move(stream_));
  }
  abandon();
}

void UpstreamCall::abandon() {
  if (stream_) {
    error_code ignored;
    // No TLS close_notify: the replica treats a closed connection as the client gone, which is
    // what abandon() means; a clean shutdown would only cost a round trip.
    stream_->tcp().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    stream_->tcp().close();
    stream_.reset();
  }
  watching();
}

}  // namespace cadenza::gateway
