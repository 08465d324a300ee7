// A scripted OpenAI-compatible streaming server for the load-generator tests: runs its own
// io_context thread on 127.0.0.1 (an ephemeral port) and answers every POST the same scripted way.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cadenza::loadgen::testing {

struct FakeScript {
  enum class Mode {
    stream,            // header, TTFT wait, `chunks` content chunks every ITL, usage, [DONE]
    http_500,          // a 500 with a JSON error body (keep-alive)
    close_mid_stream,  // header, 3 chunks, then the socket is closed
    malformed,         // a chunk whose data is not JSON
    no_done,           // a normal stream without the [DONE] sentinel
  };
  Mode mode = Mode::stream;
  int ttft_ms = 200;
  int itl_ms = 50;
  int chunks = 10;
  bool send_usage = true;
  // stream mode: the chat role announcement ({"role":"assistant","content":""}) right after the
  // headers, before the TTFT wait (it must not count as the first token).
  bool role_chunk = false;
  // stream mode: every k-th token chunk (k > 0) has empty content, as a server sends while it
  // holds back part of a UTF-8 character; it is still a token.
  int empty_every = 0;
  // stream mode: a finish-only chunk (delta {} with finish_reason "length") after the tokens.
  bool finish_chunk = false;
  // stream mode: the last token chunk has empty content and finish_reason "length" (vLLM and
  // Cadenza put the finish_reason on the last token's chunk).
  bool last_token_finishes = false;
  // GET /metrics: the k-th scrape gets metrics_pages[min(k, size - 1)] (text/plain); with no
  // pages, a 404. Scrapes are not counted in requests(), bodies() or targets().
  std::vector<std::string> metrics_pages = {};
};

class FakeServer {
 public:
  explicit FakeServer(FakeScript script);
  ~FakeServer();  // stops the server and joins its thread
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }
  int connections() const { return connections_.load(); }
  std::vector<std::string> bodies() const;   // request bodies received
  std::vector<std::string> targets() const;  // request paths received
  int scrapes() const { return scrapes_.load(); }  // GET /metrics received
  std::vector<std::string> scrape_auth() const;  // their Authorization headers ("" when none)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
  std::atomic<int> requests_{0};
  std::atomic<int> connections_{0};
  std::atomic<int> scrapes_{0};
};

// A port on 127.0.0.1 with nothing listening (bound once, then released).
uint16_t unused_port();

}  // namespace cadenza::loadgen::testing
