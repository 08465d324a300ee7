// A tiny HTTP/1.1 server for the hub tests that answers like the Hugging Face hub: files by path,
// byte ranges (206, 416), ETag, an X-Linked-Etag on a redirect to a "CDN" path, Bearer-token
// checks (401), 404, and connections dropped half-way through a body. It binds 127.0.0.1 on an
// ephemeral port and serves one connection at a time on its own thread (Connection: close).
// Thread-safety: add() before requests; the recorded request lines and Range headers are read
// through the mutex-protected accessors.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cadenza::hub::testing {

struct ServedFile {
  std::string body;
  std::string etag;           // sent as ETag: "..." (empty: none)
  std::string linked_etag;    // when set, the path answers 302 to /cdn/<path> with X-Linked-Etag
  std::string token;          // when set, "Authorization: Bearer <token>" is required (else 401)
  int drop_first = 0;         // the first N body responses stop half-way and close the connection
  bool ignore_range = false;  // answer 200 with the whole file even to a Range request
};

class HubServer {
 public:
  HubServer();  // binds and starts the thread
  ~HubServer();
  uint16_t port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void add(const std::string& path, ServedFile file);
  std::vector<std::string> ranges() const;          // Range headers received, in order
  std::vector<std::string> authorizations() const;  // Authorization headers received ("" if none)

 private:
  void loop();
  void serve(int fd);

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::map<std::string, ServedFile> files_;
  std::vector<std::string> ranges_;
  std::vector<std::string> auths_;
  std::thread thread_;
};

}  // namespace cadenza::hub::testing
