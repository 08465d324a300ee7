#include "fake_server.h"

#include <algorithm>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

namespace cadenza::loadgen::testing {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

struct FakeServer::Impl {
  FakeServer& owner;
  FakeScript script;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::thread thread;
  mutable std::mutex mu;
  std::vector<std::string> bodies, targets, scrape_auth;

  Impl(FakeServer& o, FakeScript s) : owner(o), script(s) {}

  static std::string chunk(std::string_view payload) {
    return fmt::format("{:x}\r\n{}\r\n", payload.size(), payload);
  }
  static std::string event(std::string_view data) {
    return chunk(fmt::format("data: {}\n\n", data));
  }

  asio::awaitable<bool> send(tcp::socket& s, const std::string& bytes) {
    error_code ec;
    co_await asio::async_write(s, asio::buffer(bytes),
                               asio::redirect_error(asio::use_awaitable, ec));
    co_return !ec;
  }

  // Sleeps until an absolute time, so late wake-ups (a loaded machine) do not accumulate over a
  // stream: chunk i leaves at request + TTFT + i * ITL whatever happened before.
  asio::awaitable<void> sleep_until(std::chrono::steady_clock::time_point at) {
    asio::steady_timer t(io, at);
    error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }

  asio::awaitable<void> session(tcp::socket s) {
    ++owner.connections_;
    // Like real servers: every chunk leaves when written (no Nagle delay behind a delayed ACK).
    error_code nodelay_ec;
    s.set_option(tcp::no_delay(true), nodelay_ec);
    boost::beast::flat_buffer buf;
    while (true) {
      http::request<http::string_body> req;
      error_code ec;
      co_await http::async_read(s, buf, req, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      if (req.method() == http::verb::get && req.target() == "/metrics") {
        const int k = owner.scrapes_++;
        {
          std::lock_guard lock(mu);
          scrape_auth.push_back(std::string(req[http::field::authorization]));
        }
        const auto& pages = script.metrics_pages;
        const std::string reply =
            pages.empty()
                ? std::string("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")
                : fmt::format("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                              "Content-Length: {}\r\n\r\n{}",
                              pages[std::min(static_cast<size_t>(k), pages.size() - 1)].size(),
                              pages[std::min(static_cast<size_t>(k), pages.size() - 1)]);
        if (!co_await send(s, reply)) break;
        continue;
      }
      ++owner.requests_;
      {
        std::lock_guard lock(mu);
        bodies.push_back(req.body());
        targets.push_back(std::string(req.target()));
      }
      if (script.mode == FakeScript::Mode::http_500) {
        const std::string body =
            R"({"error":{"message":"scripted failure","type":"server_error"}})";
        if (!co_await send(s, fmt::format("HTTP/1.1 500 Internal Server Error\r\nContent-Type: "
                                          "application/json\r\nContent-Length: {}\r\n\r\n{}",
                                          body.size(), body)))
          break;
        continue;
      }
      if (!co_await send(s,
                         "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"))
        break;
      const auto first =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(script.ttft_ms);
      const std::string role =
          R"({"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})";
      if (script.role_chunk && !co_await send(s, event(role))) break;
      co_await sleep_until(first);
      const int n = script.mode == FakeScript::Mode::close_mid_stream ? 3 : script.chunks;
      bool ok = true;
      for (int i = 0; i < n && ok; ++i) {
        if (i > 0) co_await sleep_until(first + i * std::chrono::milliseconds(script.itl_ms));
        const int k = script.empty_every;
        const bool empty = k > 0 && i % k == k - 1;
        std::string data = fmt::format(
            R"({{"id":"x","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":"{}"}},"finish_reason":null}}]}})",
            empty ? std::string() : fmt::format(" tok{}", i));
        if (script.last_token_finishes && i == n - 1)
          data =
              R"({"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":""},"finish_reason":"length"}]})";
        if (script.mode == FakeScript::Mode::malformed && i == 1) data = "{not json";
        ok = co_await send(s, event(data));
      }
      if (!ok) break;
      if (script.mode == FakeScript::Mode::close_mid_stream) {
        s.close(ec);
        break;
      }
      std::string tail;
      if (script.finish_chunk)
        tail += event(
            R"({"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"length"}]})");
      if (script.send_usage)
        tail += event(fmt::format(
            R"({{"id":"x","object":"chat.completion.chunk","choices":[],"usage":{{"prompt_tokens":7,"completion_tokens":{},"total_tokens":{}}}}})",
            n, n + 7));
      if (script.mode != FakeScript::Mode::no_done) tail += event("[DONE]");
      tail += "0\r\n\r\n";
      if (!co_await send(s, tail)) break;
    }
  }

  asio::awaitable<void> accept_loop() {
    while (true) {
      error_code ec;
      tcp::socket s = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      asio::co_spawn(io, session(std::move(s)), asio::detached);
    }
  }
};

FakeServer::FakeServer(FakeScript script) : impl_(std::make_unique<Impl>(*this, script)) {
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen();
  port_ = impl_->acceptor.local_endpoint().port();
  asio::co_spawn(impl_->io, impl_->accept_loop(), asio::detached);
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

FakeServer::~FakeServer() {
  impl_->io.stop();
  impl_->thread.join();
}

std::vector<std::string> FakeServer::bodies() const {
  std::lock_guard lock(impl_->mu);
  return impl_->bodies;
}

std::vector<std::string> FakeServer::targets() const {
  std::lock_guard lock(impl_->mu);
  return impl_->targets;
}

std::vector<std::string> FakeServer::scrape_auth() const {
  std::lock_guard lock(impl_->mu);
  return impl_->scrape_auth;
}

uint16_t unused_port() {
  asio::io_context io;
  tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

}  // namespace cadenza::loadgen::testing
