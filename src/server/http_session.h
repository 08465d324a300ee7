// HTTP/1.1 over Boost.Beast: a Listener accepts connections; each Session reads requests (with
// keep-alive), answers through the Router, and streams generations as SSE over chunked encoding.
//
// Threads: every Session runs on its own strand of the shared io_context, so a small fixed pool
// of I/O threads serves any number of connections (a waiting stream costs no thread). Engine
// outputs arrive on the engine thread and are posted to the session's strand.
// While a generation runs, the session keeps a read pending on the socket; EOF or an error there
// (or a failed write) means the client went away, and the generation is aborted so its KV blocks
// come back.
// Ownership: sessions own themselves (shared_from_this) while an operation or engine sink refers
// to them; the ServerContext is borrowed and outlives the io_context's handlers.
//
// TLS: Session is a template over its stream, PlainStream (TCP) or TlsStream (OpenSSL through
// Beast's ssl_stream over TCP); both are instantiated in http_session.cpp. A TLS session first
// runs the server handshake (with a timeout), then behaves exactly like a plain one; closing sends
// TLS close_notify. The Listener makes TLS sessions when it was given an ssl::context.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "server/routes.h"
#include "server/server_context.h"

namespace cadenza::server {

using PlainStream = boost::beast::tcp_stream;
using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;
  // `stream_args` construct the Stream: (socket) for PlainStream, (socket, ssl_context) for TLS.
  template <class... StreamArgs>
  explicit Session(ServerContext& ctx, StreamArgs&&... stream_args)
      : stream_(std::forward<StreamArgs>(stream_args)...),
        deadline_(stream_.get_executor()),
        ctx_(ctx),
        router_(ctx) {}
  void start();

 private:
  void do_read();
  void on_header(boost::beast::error_code ec, size_t bytes);
  void on_read(boost::beast::error_code ec, size_t bytes);
  void handle_request();
  // Router mode: waits for the request's model (ModelPool::acquire), then routes again.
  void await_model(const std::string& name);
  void on_model(Result<ModelHandle> loaded);
  // Embeddings and rerank: waits for the reply the engine thread makes (RouteResult::deferred).
  void await_deferred(DeferredReply work);
  // Gives back the open_generations count taken while waiting for a model or a deferred reply
  // (idempotent).
  void release_await();
  void start_generation(RouteResult routed);
  // A generation with inputs to prepare first (images: GenerationPlan::prepare): waits for them
  // like a deferred reply (no thread, one open_generations count), then submits, or answers
  // the preparation's error in the request's API shape.
  void await_inputs(RouteResult routed);
  void on_gen_event(uint64_t seq, GenEvent e);
  void fail_generation(const ApiError& e);
  // The request's deadline (--request-timeout, X-Request-Timeout): arms deadline_ for the
  // generation `seq`; when it fires while that generation still runs, it is aborted and answered
  // 504 (an error event mid-stream).
  void arm_deadline(uint64_t seq);
  void on_deadline(uint64_t seq);
  void watch();
  void on_watch(boost::beast::error_code ec, size_t bytes);
  void client_gone();

  // Queues bytes for the socket. `last`: this completes the current response.
  void send(std::string bytes, bool last);
  void reply(const HttpReply& r, bool last = true);
  void do_write();
  void on_write(boost::beast::error_code ec, size_t bytes);
  void response_done();
  // Ends a connection that answered with Connection: close (plain: half-close, then read and
  // discard until EOF or a timeout; TLS: close_notify, then close).
  void close_connection();
  void drain_and_close();
  boost::beast::tcp_stream& lowest() { return boost::beast::get_lowest_layer(stream_); }
  void log_access(int status);

  Stream stream_;
  // The current generation's deadline (on the session's strand; its handler holds a weak_ptr, so
  // a pending deadline keeps nothing alive).
  boost::asio::steady_timer deadline_;
  ServerContext& ctx_;
  Router router_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  HttpRequest req_;

  // The session's state: one value. start_generation() takes the open_generations count as it
  // enters kGenerating; every other change goes through enter(), which gives the count back when
  // the new state no longer holds it. Transitions (anything not listed does not happen):
  //   kReading     -> kReplying     a plain reply (router answer, 400/413, 429/503 at submit)
  //   (router mode: a request whose model is loading stays in kReading, with no read pending,
  //    until the pool answers, then goes on as above; so does an embeddings or rerank request
  //    until the engine thread's reply arrives; meanwhile awaiting_ holds one open_generations
  //    count, given back when its reply is written or its generation starts)
  //   kReading     -> kGenerating   a generation was submitted; the disconnect watch starts
  //   kGenerating  -> kReading      the submission was refused (then kReplying: 429 or 503)
  //   kGenerating  -> kStreaming    SSE headers written (stream: true)
  //   kGenerating  -> kFinishing    the whole answer, or an error reply before any byte
  //   kStreaming   -> kFinishing    the final chunk, or an error event mid-stream
  //   kReplying    -> kReading | kClosing              last byte written (keep-alive or not)
  //   kFinishing   -> kStoppingWatch{Read,Close}       last byte written: cancel the watch
  //   kStoppingWatchThenRead -> kReading,  kStoppingWatchThenClose -> kClosing   (watch ended)
  //   any state but kClosing -> kGone    the client went away (watch saw EOF, a write failed)
  // Facts per state: kGenerating, kStreaming and kFinishing hold one ctx_.open_generations count
  // and have the disconnect watch pending (so do the two kStoppingWatch states, without the
  // count); kGone holds the count while job_ is set (an aborted generation whose final event is
  // awaited; it then logs 499). kClosing and kGone write nothing more.
  enum class State : uint8_t {
    kReading,                 // waiting for or reading a request (after the TLS handshake)
    kReplying,                // a plain reply is queued
    kGenerating,              // submitted; nothing written yet
    kStreaming,               // SSE headers (and chunks) written; the generation runs
    kFinishing,               // the generation's last bytes are queued
    kStoppingWatchThenRead,   // response done, keep-alive: waiting for the cancelled watch
    kStoppingWatchThenClose,  // response done, Connection: close: waiting for the cancelled watch
    kClosing,                 // shutting down after Connection: close
    kGone,                    // the client went away or a write failed
  };
  void enter(State next);
  // Whether this session holds a ctx_.open_generations count (see State).
  bool holds_generation() const;
  // A generation is running and nothing has ended its response yet.
  bool in_generation() const { return state_ == State::kGenerating || state_ == State::kStreaming; }
  // Nothing more is written or read (the connection is shutting down or gone).
  bool ended() const { return state_ == State::kClosing || state_ == State::kGone; }

  State state_ = State::kReading;

  // The current request (req_'s keep_alive() is cleared when the connection must close after it).
  std::string request_id_;
  std::string route_;
  int status_ = 0;
  std::chrono::steady_clock::time_point started_;
  // Seconds the current request may run from started_ (0: no limit): the server's
  // --request-timeout, or less when the request's X-Request-Timeout header asks.
  double timeout_s_ = 0;

  // The current generation, if any.
  std::unique_ptr<GenerationJob> job_;
  EngineBridge* bridge_ = nullptr;  // the generation's model's bridge (set with job_)
  // Router mode: held while this session holds a generation (see holds_generation), so the pool
  // cannot unload the model under it; reset by enter() (and with kGone's final event).
  ModelHandle model_;
  bool awaiting_ = false;  // for a model or a deferred reply: holds an open_generations count (see State)
  uint64_t ticket_ = 0;
  uint64_t gen_seq_ = 0;  // tags engine events with the generation they belong to

  // Writing: a write is in flight exactly when out_ is not empty (and the session has not ended).
  std::deque<std::string> out_;
  // The response's last bytes are queued and its access log line (and HTTP counter) is not yet
  // written: log_access clears it, so each response is counted once.
  bool final_queued_ = false;

  // The disconnect watch's buffer (a read pending while a generation runs; see State).
  char watch_buf_[512];
};

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  // `tls`: when not null, connections are TLS (borrowed; must outlive the listener's sessions).
  Listener(boost::asio::io_context& ioc, ServerContext& ctx, boost::asio::ssl::context* tls);
  // Binds and listens. Errors: bad address, port in use.
  boost::beast::error_code open(const boost::asio::ip::tcp::endpoint& endpoint);
  void start();
  // Closes the acceptor (from any thread; posted to its strand).
  void close();
  uint16_t port() const { return port_; }

 private:
  void do_accept();
  void on_accept(boost::beast::error_code ec, boost::asio::ip::tcp::socket socket);

  boost::asio::io_context& ioc_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::ip::tcp::acceptor acceptor_;
  ServerContext& ctx_;
  boost::asio::ssl::context* tls_;
  uint16_t port_ = 0;
};

}  // namespace cadenza::server
