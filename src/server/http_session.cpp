#include "server/http_session.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/read.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "server/sse.h"

namespace cadenza::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

namespace {

constexpr auto kIdleTimeout = std::chrono::seconds(120);
constexpr auto kHandshakeTimeout = std::chrono::seconds(30);
constexpr auto kCloseTimeout = std::chrono::seconds(5);

// A client-provided X-Request-Id is kept when it is short and printable.
bool acceptable_request_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id)
    if (c < 0x21 || c > 0x7e) return false;
  return true;
}

// The request's time limit: the server's --request-timeout, lowered by a valid X-Request-Timeout
// header (seconds, > 0). A malformed header is an error (the caller answers 400).
Result<double> request_timeout(const HttpRequest& req, double server_limit) {
  auto it = req.find("X-Request-Timeout");
  if (it == req.end()) return server_limit;
  const std::string v(to_sv(it->value()));
  char* end = nullptr;
  errno = 0;
  const double t = v.empty() ? 0 : std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || errno != 0 || !std::isfinite(t) || t <= 0)
    return make_error("X-Request-Timeout must be a positive number of seconds, got '{}'",
                      v.substr(0, 64));
  return server_limit > 0 ? std::min(server_limit, t) : t;
}

std::string head_lines(int status, const std::string& request_id) {
  return fmt::format("HTTP/1.1 {} {}\r\nServer: cadenza\r\nX-Request-Id: {}\r\n", status,
                     std::string(http::obsolete_reason(static_cast<http::status>(status))),
                     request_id);
}

}  // namespace

template <class Stream>
bool Session<Stream>::holds_generation() const {
  switch (state_) {
    case State::kGenerating:
    case State::kStreaming:
    case State::kFinishing: return true;
    case State::kGone: return job_ != nullptr;
    default: return false;
  }
}

template <class Stream>
void Session<Stream>::enter(State next) {
  const bool held = holds_generation();
  state_ = next;
  if (held && !holds_generation()) ctx_.open_generations.fetch_sub(1);
  // Router mode: the model stays loaded only while a generation needs it.
  if (!holds_generation()) model_.reset();
}

template <class Stream>
void Session<Stream>::start() {
  net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
    if constexpr (kTls) {
      self->lowest().expires_after(kHandshakeTimeout);
      self->stream_.async_handshake(net::ssl::stream_base::server, [self](beast::error_code ec) {
        if (ec) {
          // Not TLS, a bad certificate on the client's side, a
          // timeout: nothing to answer.
          spdlog::debug("TLS handshake: {}", ec.message());
          beast::error_code ignored;
          self->lowest().socket().close(ignored);
          return;
        }
        self->do_read();
      });
    } else {
      self->do_read();
    }
  });
}

template <class Stream>
void Session<Stream>::do_read() {
  if (ended()) return;
  enter(State::kReading);
  parser_.emplace();
  parser_->body_limit(ctx_.max_body_bytes);
  parser_->header_limit(16 * 1024);
  lowest().expires_after(kIdleTimeout);
  http::async_read_header(
      stream_, buffer_, *parser_,
      beast::bind_front_handler(&Session<Stream>::on_header, this->shared_from_this()));
}

template <class Stream>
void Session<Stream>::on_header(beast::error_code ec, size_t bytes) {
  if (ec) {
    on_read(ec, bytes);  // includes a Content-Length over the body limit
    return;
  }
  auto read_body = [self = this->shared_from_this()] {
    http::async_read(self->stream_, self->buffer_, *self->parser_,
                     beast::bind_front_handler(&Session<Stream>::on_read, self));
  };
  const auto& h = parser_->get();
  auto expect = h.find(http::field::expect);
  if (expect != h.end() && beast::iequals(expect->value(), "100-continue") && !parser_->is_done()) {
    // curl and others wait for this before sending a large body.
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    net::async_write(stream_, net::buffer(kContinue),
                     [self = this->shared_from_this(), read_body](beast::error_code wec, size_t) {
                       if (wec) {
                         self->on_read(wec, 0);
                         return;
                       }
                       read_body();
                     });
    return;
  }
  read_body();
}

template <class Stream>
void Session<Stream>::on_read(beast::error_code ec, size_t) {
  if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset ||
      ec == net::ssl::error::stream_truncated || ec.category() == net::error::get_ssl_category()) {
    // (TLS: the client closed without close_notify, or the TLS layer failed: nothing to answer.)
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    enter(State::kGone);
    return;
  }
  started_ = std::chrono::steady_clock::now();
  request_id_ = random_id("req-");
  if (ec) {
    // A body over the limit, or a malformed request: answer and close.
    route_ = "other";
    ApiError e;
    if (ec == http::error::body_limit) {
      e.status = 413;
      e.message = fmt::format("the request body is larger than {} bytes", ctx_.max_body_bytes);
      e.code = "request_too_large";
    } else {
      e.status = 400;
      e.message = fmt::format("malformed HTTP request: {}", ec.message());
    }
    req_ = {};
    req_.keep_alive(false);  // the stream cannot be trusted after a bad request
    reply(error_reply(e));
    return;
  }
  req_ = parser_->release();
  if (auto it = req_.find("X-Request-Id");
      it != req_.end() && acceptable_request_id(to_sv(it->value())))
    request_id_ = std::string(to_sv(it->value()));
  handle_request();
}

template <class Stream>
void Session<Stream>::handle_request() {
  lowest().expires_never();
  if (ctx_.draining.load()) req_.keep_alive(false);  // connections end with their response
  Result<double> limit = request_timeout(req_, ctx_.request_timeout_s);
  if (!limit) {
    route_ = "other";
    reply(error_reply(api_error(400, limit.error(), "invalid_request_error", "invalid_timeout")));
    return;
  }
  timeout_s_ = *limit;
  RouteResult routed = router_.handle(req_);
  route_ = routed.route;
  if (!routed.await_model.empty()) {
    await_model(routed.await_model);
    return;
  }
  if (routed.deferred) {
    await_deferred(std::move(routed.deferred));
    return;
  }
  if (routed.reply) {
    reply(*routed.reply);
    return;
  }
  start_generation(std::move(routed));
}

template <class Stream>
void Session<Stream>::await_model(const std::string& name) {
  // Router mode: the model loads on the pool's loader thread; this connection waits without a
  // thread (state kReading, no read pending) and comes back on its strand.
  auto self = this->shared_from_this();
  ModelPool::AcquireResult got =
      ctx_.pool->acquire(name, [self](Result<ModelHandle> loaded) {
        net::post(self->stream_.get_executor(), [self, loaded = std::move(loaded)]() mutable {
          self->on_model(std::move(loaded));
        });
      });
  if (got.status == ModelPool::Acquire::kReady) {
    on_model(std::move(got.model));
    return;
  }
  if (got.status == ModelPool::Acquire::kWaiting) {
    spdlog::info("[{}] waiting for model '{}' to load", request_id_, name);
    // Counted like a generation, so that a drain lets the answer (503) go out before it stops.
    ctx_.open_generations.fetch_add(1);
    awaiting_ = true;
    return;
  }
  const ApiError e =
      got.status == ModelPool::Acquire::kQueueFull
          ? api_error(429,
                      fmt::format("too many requests are waiting for model '{}' to load; retry "
                                  "later",
                                  name),
                      "rate_limit_error", "queue_full")
      : got.status == ModelPool::Acquire::kNotAccepting
          ? api_error(503, "the server is draining", "service_unavailable", "not_ready")
          : api_error(404, fmt::format("The model '{}' does not exist", name),
                      "invalid_request_error", "model_not_found");
  HttpReply r = error_reply(e);
  if (e.status != 404) r.headers.emplace_back("Retry-After", "1");
  reply(r);
}

template <class Stream>
void Session<Stream>::await_deferred(DeferredReply work) {
  // Like a model load: no thread waits; the reply comes back on this connection's strand. The
  // open_generations count lets a drain wait for it (already held after waiting for a model).
  if (!awaiting_) {
    ctx_.open_generations.fetch_add(1);
    awaiting_ = true;
  }
  auto self = this->shared_from_this();
  work([self](HttpReply reply) {
    net::post(self->stream_.get_executor(), [self, reply = std::move(reply)] {
      if (self->ended()) {
        self->release_await();
        return;
      }
      self->reply(reply);
    });
  });
}

template <class Stream>
void Session<Stream>::release_await() {
  if (!awaiting_) return;
  awaiting_ = false;
  ctx_.open_generations.fetch_sub(1);
}

template <class Stream>
void Session<Stream>::on_model(Result<ModelHandle> loaded) {
  // The await's count is given back once the reply is written (log_access) or the generation
  // holds its own (start_generation).
  if (ended()) {
    release_await();
    return;
  }
  if (!loaded) {
    ApiError e;
    const bool draining = ctx_.draining.load();
    e.status = draining ? 503 : 500;
    e.type = draining ? "service_unavailable" : "server_error";
    e.code = draining ? "not_ready" : "model_load_failed";
    e.message = draining ? loaded.error() : fmt::format("loading the model failed: {}", loaded.error());
    reply(error_reply(e));
    return;
  }
  RouteResult routed = router_.handle(req_, *loaded);
  route_ = routed.route;
  if (routed.reply) {
    reply(*routed.reply);
    return;
  }
  if (routed.deferred) {
    await_deferred(std::move(routed.deferred));
    return;
  }
  if (!routed.generation) {  // cannot happen with the model given; never leave the client hanging
    ApiError e;
    e.status = 500;
    e.type = "server_error";
    e.message = "the model was unloaded before the request could start";
    reply(error_reply(e));
    return;
  }
  if (routed.generation->prepare) {  // keeps this await's count until its inputs are ready
    await_inputs(std::move(routed));
    return;
  }
  start_generation(std::move(routed));
  release_await();
}

template <class Stream>
void Session<Stream>::await_inputs(RouteResult routed) {
  if (!awaiting_) {
    ctx_.open_generations.fetch_add(1);
    awaiting_ = true;
  }
  auto self = this->shared_from_this();
  auto held = std::make_shared<RouteResult>(std::move(routed));
  PrepareInputs prepare = std::move(held->generation->prepare);
  held->generation->prepare = nullptr;
  prepare([self, held](PreparedInputs in) {
    net::post(self->stream_.get_executor(), [self, held, in = std::move(in)]() mutable {
      if (self->ended()) {
        self->release_await();
        return;
      }
      if (in.error) {  // the count goes back once the reply is written
        self->reply(shaped_error_reply(held->generation->job->api(), *in.error));
        return;
      }
      held->generation->inputs.front().images = std::move(in.images);
      self->start_generation(std::move(*held));
      self->release_await();
    });
  });
}

template <class Stream>
void Session<Stream>::start_generation(RouteResult routed) {
  GenerationPlan& plan = *routed.generation;
  if (plan.prepare) {
    await_inputs(std::move(routed));
    return;
  }
  auto self = this->shared_from_this();
  const uint64_t seq = ++gen_seq_;
  GenSink sink = [self, seq](GenEvent e) {
    net::post(self->stream_.get_executor(), [self, seq, e = std::move(e)]() mutable {
      self->on_gen_event(seq, std::move(e));
    });
  };
  // Counted before the submission: the engine may answer before submit() returns.
  ctx_.open_generations.fetch_add(1);
  job_ = std::move(plan.job);
  bridge_ = plan.bridge;
  model_ = std::move(plan.model);
  state_ = State::kGenerating;  // the count taken above is this state's
  Submission sub = bridge_->submit(std::move(plan.inputs), std::move(sink));
  if (sub.status != SubmitStatus::kOk) {
    const apishape::Api api = job_->api();
    job_.reset();
    enter(State::kReading);  // gives the count back; the reply below is a plain one
    const ApiError e =
        sub.status == SubmitStatus::kQueueFull
            ? api_error(429, "the server's request queue is full; retry later", "rate_limit_error",
                        "queue_full")
        : sub.status == SubmitStatus::kTtftLimit
            ? api_error(429,
                        fmt::format("the server cannot start this request within its "
                                    "time-to-first-token objective now (predicted {:.0f} ms, "
                                    "limit {:.0f} ms); retry later",
                                    1000 * sub.predicted_ttft_s, 1000 * sub.ttft_limit_s),
                        "rate_limit_error", "ttft_limit")
            : api_error(503, "the server is draining", "service_unavailable", "not_ready");
    HttpReply r = shaped_error_reply(api, e);
    if (sub.status == SubmitStatus::kTtftLimit) {
      // Whole seconds for Retry-After (HTTP's unit); the prediction itself for retry-after-ms,
      // which OpenAI's SDKs prefer: the next step boundary is usually well under a second away.
      r.headers.emplace_back("Retry-After",
                             std::to_string(std::max<int64_t>(
                                 1, static_cast<int64_t>(std::ceil(sub.retry_after_s)))));
      r.headers.emplace_back("retry-after-ms",
                             std::to_string(std::max<int64_t>(
                                 1, std::llround(1000 * sub.retry_after_s))));
    } else {
      r.headers.emplace_back("Retry-After", "1");
    }
    reply(r);
    return;
  }
  ticket_ = sub.ticket;
  arm_deadline(seq);
  watch();
}

template <class Stream>
void Session<Stream>::arm_deadline(uint64_t seq) {
  if (timeout_s_ <= 0) return;
  // From the request's arrival: time spent waiting for a model to load counts too.
  deadline_.expires_at(started_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(timeout_s_)));
  std::weak_ptr<Session> weak = this->shared_from_this();
  deadline_.async_wait([weak, seq](beast::error_code ec) {
    if (ec) return;  // cancelled: the response ended first
    if (auto self = weak.lock()) self->on_deadline(seq);
  });
}

template <class Stream>
void Session<Stream>::on_deadline(uint64_t seq) {
  // Only the generation the timer was armed for, and only while nothing has ended its response.
  if (seq != gen_seq_ || !job_ || !in_generation()) return;
  spdlog::info("[{}] request timeout ({} s): aborting the generation", request_id_, timeout_s_);
  fail_generation(api_error(
      504, fmt::format("the request did not finish within its time limit of {} s", timeout_s_),
      "timeout_error", "request_timeout"));
  job_.reset();  // the aborted generation's late events are dropped
}

template <class Stream>
void Session<Stream>::watch() {
  if (ended()) return;
  stream_.async_read_some(
      net::buffer(watch_buf_),
      beast::bind_front_handler(&Session<Stream>::on_watch, this->shared_from_this()));
}

template <class Stream>
void Session<Stream>::on_watch(beast::error_code ec, size_t bytes) {
  if (state_ == State::kStoppingWatchThenClose) {
    close_connection();
    return;
  }
  if (!ec) {
    // Pipelined bytes of the next request: keep them for the parser.
    auto dst = buffer_.prepare(bytes);
    net::buffer_copy(dst, net::buffer(watch_buf_, bytes));
    buffer_.commit(bytes);
    if (state_ == State::kStoppingWatchThenRead)
      do_read();
    else
      watch();
    return;
  }
  if (ec == net::error::operation_aborted && state_ == State::kStoppingWatchThenRead) {
    do_read();
    return;
  }
  if (ec != net::error::operation_aborted) client_gone();
}

template <class Stream>
void Session<Stream>::client_gone() {
  if (state_ == State::kGone) return;
  if (in_generation()) {
    spdlog::info("[{}] client disconnected; aborting the generation", request_id_);
    bridge_->abort(ticket_);
  } else {
    job_.reset();  // no generation runs (its last bytes were being written): nothing to await
  }
  enter(State::kGone);  // keeps the count while job_ awaits its final event
  beast::error_code ignored;
  lowest().socket().close(ignored);
}

template <class Stream>
void Session<Stream>::fail_generation(const ApiError& e) {
  bridge_->abort(ticket_);
  if (state_ == State::kGenerating) {  // nothing written yet
    reply(shaped_error_reply(job_->api(), e));
    return;
  }
  // Mid-stream: an error event, then [DONE] (or the job's API's failure events).
  std::string sse = job_->stream_error(e);
  send(http_chunk(sse) + std::string(kLastChunk), true);
}

template <class Stream>
void Session<Stream>::on_gen_event(uint64_t seq, GenEvent e) {
  // Events of an earlier generation (ended early by an error) or after the end are dropped.
  if (seq != gen_seq_ || !job_) return;
  const bool was_error = job_->error().has_value();
  std::string sse = job_->on_event(e);
  if (state_ == State::kGone) {
    if (job_->done()) {  // the aborted generation's final event: kGone's count goes with it
      job_.reset();
      model_.reset();
      ctx_.open_generations.fetch_sub(1);
      status_ = 499;
      log_access(499);
    }
    return;
  }
  if (!was_error && job_->error()) {
    const ApiError err = *job_->error();
    fail_generation(err);
    job_.reset();
    return;
  }
  if (job_->stream()) {
    if (state_ == State::kGenerating && (!sse.empty() || job_->done())) {
      enter(State::kStreaming);
      status_ = 200;
      std::string h = head_lines(200, request_id_);
      h += "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
           "Transfer-Encoding: chunked\r\n";
      h += req_.keep_alive() ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
      send(std::move(h), false);
    }
    if (!sse.empty()) send(http_chunk(sse), false);
    if (job_->done()) {
      send(http_chunk(job_->stream_tail()) + std::string(kLastChunk), true);
      job_.reset();
    }
  } else if (job_->done()) {
    reply(ordered_json_reply(200, job_->body()));
    job_.reset();
  }
}

template <class Stream>
void Session<Stream>::reply(const HttpReply& r, bool last) {
  status_ = r.status;
  std::string out = head_lines(r.status, request_id_);
  for (const auto& [k, v] : r.headers) out += fmt::format("{}: {}\r\n", k, v);
  out += fmt::format("Content-Type: {}\r\nContent-Length: {}\r\n", r.content_type, r.body.size());
  out += req_.keep_alive() ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  if (req_.method() != http::verb::head) out += r.body;
  send(std::move(out), last);
}

template <class Stream>
void Session<Stream>::send(std::string bytes, bool last) {
  if (ended()) return;
  const bool idle = out_.empty();  // else a write is in flight and on_write continues
  out_.push_back(std::move(bytes));
  if (last) {
    enter(in_generation() ? State::kFinishing : State::kReplying);
    final_queued_ = true;
  }
  if (idle) do_write();
}

template <class Stream>
void Session<Stream>::do_write() {
  if (out_.empty() || ended()) return;
  net::async_write(stream_, net::buffer(out_.front()),
                   beast::bind_front_handler(&Session<Stream>::on_write, this->shared_from_this()));
}

template <class Stream>
void Session<Stream>::on_write(beast::error_code ec, size_t) {
  if (ec) {
    client_gone();
    if (final_queued_) log_access(499);  // the end of the response never reached the client
    return;
  }
  out_.pop_front();
  if (state_ == State::kGone) {
    // The client hung up while this completion was queued. With several I/O threads the end of
    // the disconnect watch (the client read its whole answer, then closed) can run before it.
    // Everything written went out: the response counts as delivered unless bytes are left.
    if (final_queued_) log_access(out_.empty() ? status_ : 499);
    return;
  }
  if (!out_.empty()) {
    do_write();
    return;
  }
  if (state_ == State::kReplying || state_ == State::kFinishing) response_done();
}

template <class Stream>
void Session<Stream>::response_done() {
  log_access(status_);
  // After a generation the disconnect watch is still pending: cancel it first (TLS cannot shut
  // down while a read is pending) and go on when it ends (on_watch). An error may have ended the
  // response while other choices still run: they were aborted, and their late events are
  // dropped (job_ is gone).
  const bool watch_pending = state_ == State::kFinishing;
  job_.reset();
  deadline_.cancel();
  if (watch_pending) {
    enter(req_.keep_alive() ? State::kStoppingWatchThenRead : State::kStoppingWatchThenClose);
    lowest().socket().cancel();
    return;
  }
  if (!req_.keep_alive()) {
    close_connection();
    return;
  }
  do_read();
}

template <class Stream>
void Session<Stream>::close_connection() {
  enter(State::kClosing);  // nothing more is written
  if constexpr (kTls) {
    lowest().expires_after(kCloseTimeout);
    stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
      beast::error_code ignored;
      self->lowest().socket().close(ignored);
    });
  } else {
    // Half-close, then read and discard what the client still sends (e.g. the rest of a body
    // over the limit) so that closing does not reset the connection before it reads the answer.
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    drain_and_close();
  }
}

template <class Stream>
void Session<Stream>::drain_and_close() {
  lowest().expires_after(kCloseTimeout);
  stream_.async_read_some(net::buffer(watch_buf_),
                          [self = this->shared_from_this()](beast::error_code ec, size_t) {
                            if (!ec) {
                              self->drain_and_close();
                              return;
                            }
                            beast::error_code ignored;
                            self->lowest().socket().close(ignored);
                          });
}

template <class Stream>
void Session<Stream>::log_access(int status) {
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_).count();
  final_queued_ = false;
  ctx_.metrics->add_http_request(route_, status);
  spdlog::info("[{}] {} {} {} {:.1f} ms", request_id_, std::string(req_.method_string()),
               std::string(req_.target()), status, ms);
  release_await();
}

Listener::Listener(net::io_context& ioc, ServerContext& ctx, net::ssl::context* tls)
    : ioc_(ioc), strand_(net::make_strand(ioc)), acceptor_(strand_), ctx_(ctx), tls_(tls) {}

beast::error_code Listener::open(const tcp::endpoint& endpoint) {
  beast::error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  if (ec) return ec;
  acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (ec) return ec;
  acceptor_.bind(endpoint, ec);
  if (ec) return ec;
  acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return ec;
  port_ = acceptor_.local_endpoint(ec).port();
  return ec;
}

void Listener::start() {
  net::dispatch(strand_, [self = this->shared_from_this()] { self->do_accept(); });
}

void Listener::close() {
  net::post(strand_, [self = this->shared_from_this()] {
    beast::error_code ignored;
    self->acceptor_.close(ignored);
  });
}

void Listener::do_accept() {
  acceptor_.async_accept(net::make_strand(ioc_),
                         beast::bind_front_handler(&Listener::on_accept, this->shared_from_this()));
}

void Listener::on_accept(beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (!ec) {
    socket.set_option(tcp::no_delay(true), ec);
    if (tls_)
      std::make_shared<Session<TlsStream>>(ctx_, std::move(socket), *tls_)->start();
    else
      std::make_shared<Session<PlainStream>>(ctx_, std::move(socket))->start();
  } else {
    spdlog::warn("accept: {}", ec.message());
  }
  do_accept();
}

template class Session<PlainStream>;
template class Session<TlsStream>;

}  // namespace cadenza::server
