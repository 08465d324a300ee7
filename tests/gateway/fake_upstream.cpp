#include "fake_upstream.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include <fmt/format.h>

namespace cadenza::gateway::testing {

namespace {

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string chunk(const std::string& s) { return fmt::format("{:x}\r\n{}\r\n", s.size(), s); }

// Reads one request (head and Content-Length body); returns its first line, or "" on EOF.
std::string read_request(int fd) {
  std::string data;
  char buf[4096];
  size_t head_end = std::string::npos;
  while ((head_end = data.find("\r\n\r\n")) == std::string::npos) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return {};
    data.append(buf, static_cast<size_t>(n));
  }
  size_t length = 0;
  for (const char* name : {"Content-Length: ", "content-length: "}) {
    const size_t p = data.find(name);
    if (p != std::string::npos && p < head_end) length = std::stoul(data.substr(p + 16));
  }
  while (data.size() < head_end + 4 + length) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return {};
    data.append(buf, static_cast<size_t>(n));
  }
  return data.substr(0, head_end);  // the request line and headers
}

}  // namespace

FakeUpstream::FakeUpstream(Mode mode) : mode_(mode) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      listen(listen_fd_, 16) == 0 &&
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

FakeUpstream::~FakeUpstream() {
  stop_ = true;
  open_gate();
  acceptor_.join();
  for (auto& w : workers_) w.join();
  close(listen_fd_);
}

void FakeUpstream::open_gate() {
  std::lock_guard lock(mu_);
  gate_open_ = true;
  cv_.notify_all();
}

void FakeUpstream::accept_loop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    workers_.emplace_back([this, fd] {
      handle(fd);
      close(fd);
    });
  }
}

void FakeUpstream::handle(int fd) {
  const std::string head = read_request(fd);
  if (head.empty()) return;
  const std::string line = head.substr(0, head.find("\r\n"));
  auto json_response = [&](const char* status, const std::string& body) {
    write_all(fd, fmt::format("HTTP/1.1 {}\r\nContent-Type: application/json\r\n"
                              "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
                              status, body.size(), body));
  };
  if (line.rfind("GET /ready", 0) == 0) {
    ready_checks_++;
    if (ready_)
      json_response("200 OK", R"({"status":"ready"})");
    else
      json_response("503 Service Unavailable", R"({"status":"not ready"})");
    return;
  }
  generations_++;
  {
    std::lock_guard lock(mu_);
    last_head_ = head;
  }
  if (mode_ == Mode::timeout_504) {
    json_response("504 Gateway Timeout",
                  R"({"error":{"message":"the request did not finish within its time limit",)"
                  R"("type":"timeout_error","param":null,"code":"request_timeout"}})");
    return;
  }
  if (mode_ == Mode::answer) {
    json_response("200 OK",
                  R"({"id":"x","object":"chat.completion","choices":[{"index":0,)"
                  R"("message":{"role":"assistant","content":"a"},"finish_reason":"stop"}],)"
                  R"("usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}})");
    return;
  }
  const std::string event =
      R"(data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"a"}}]})"
      "\n\n";
  std::string out =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
      "Connection: close\r\n\r\n" +
      chunk(event);
  if (!write_all(fd, out)) return;
  if (mode_ == Mode::flood) {
    const std::string big = "data: {\"pad\":\"" + std::string(kFloodEventBytes - 18, 'x') + "\"}\n\n";
    const std::string c = chunk(big);  // kFloodEventBytes + 8 bytes with the framing
    for (int i = 0; i < kFloodEvents && !stop_; ++i) {
      if (!write_all(fd, c)) return;
      bytes_sent_ += c.size();
    }
    write_all(fd, chunk("data: [DONE]\n\n") + "0\r\n\r\n");
    return;
  }
  if (mode_ == Mode::break_after_first_event) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    shutdown(fd, SHUT_RDWR);  // the body's chunked encoding never ends
    return;
  }
  {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(30), [&] { return gate_open_; });
  }
  write_all(fd, chunk(event) + chunk("data: [DONE]\n\n") + "0\r\n\r\n");
}

}  // namespace cadenza::gateway::testing
