// A scripted fake replica for the cases a real one cannot produce on demand: a stream that
// breaks after its first event, a stream held open until the test releases it, a flood, and a
// replica whose /ready the test turns off and on.
// Blocking sockets, one thread per connection; every response closes its connection.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cadenza::gateway::testing {

class FakeUpstream {
 public:
  enum class Mode {
    break_after_first_event,  // SSE head, one event, then the connection closes mid-body
    gated,                    // SSE head, one event, then waits for open_gate(), then the rest
    flood,                    // kFloodEvents large events as fast as the socket takes them
    answer,                   // a small non-streamed chat.completion JSON (200) for any POST
    timeout_504,              // a 504 request_timeout error (a replica's --request-timeout)
  };
  static constexpr int kFloodEvents = 4096;
  static constexpr size_t kFloodEventBytes = 16384;  // so 64 MiB in all
  explicit FakeUpstream(Mode mode);
  ~FakeUpstream();
  uint16_t port() const { return port_; }
  void open_gate();
  // GET /ready answers 200 when ready (the start), else 503.
  void set_ready(bool ready) { ready_ = ready; }
  int ready_checks() const { return ready_checks_.load(); }
  int generations() const { return generations_.load(); }
  // The request line and headers of the last generation request (not /ready).
  std::string last_head() {
    std::lock_guard lock(mu_);
    return last_head_;
  }
  // Body bytes the socket has accepted so far (flood mode).
  size_t bytes_sent() const { return bytes_sent_.load(); }

 private:
  void accept_loop();
  void handle(int fd);

  Mode mode_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> generations_{0};
  std::atomic<bool> ready_{true};
  std::atomic<int> ready_checks_{0};
  std::atomic<size_t> bytes_sent_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool gate_open_ = false;
  std::string last_head_;  // guarded by mu_
  std::thread acceptor_;
  std::vector<std::thread> workers_;
};

}  // namespace cadenza::gateway::testing
