// A small blocking HTTP/1.1 client for the server tests (Boost.Beast), with keep-alive, and a
// raw mode for streams that the test abandons half-way.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <nlohmann/json.hpp>

namespace cadenza::server::testing {

struct Response {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  bool ok = false;  // the exchange completed (false: connection error)
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

class Client {
 public:
  explicit Client(uint16_t port);
  ~Client();
  bool connected() const { return connected_; }
  Response request(const std::string& method, const std::string& target,
                   const std::string& body = {},
                   const std::map<std::string, std::string>& headers = {});
  Response get(const std::string& target) { return request("GET", target); }
  Response post(const std::string& target, const nlohmann::json& body,
                const std::map<std::string, std::string>& headers = {}) {
    return request("POST", target, body.dump(), headers);
  }
  // Raw access: send bytes, read whatever arrives (at least one read), close.
  bool send_raw(const std::string& bytes);
  std::string read_some();
  void close();

 private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  std::string leftover_;
  bool connected_ = false;
};

// The events of an SSE body: the data of each "data: ..." line, in order.
std::vector<std::string> sse_data(const std::string& body);

// One-shot helpers (a new connection each).
Response get(uint16_t port, const std::string& target);
Response post(uint16_t port, const std::string& target, const nlohmann::json& body,
              const std::map<std::string, std::string>& headers = {});

// The value of an unlabelled sample in Prometheus text (NaN when absent).
double metric_value(const std::string& text, const std::string& sample);

// 1 to 3 random edits of `body` (replace a byte, drop up to 4 bytes, insert a JSON character),
// never empty: the HTTP fuzz tests' mutator. Deterministic for a given rng state.
std::string mutate(std::string body, std::mt19937& rng);

// Polls GET /metrics until `sample` equals `value`; false when timeout_ms passes first.
bool wait_metric(uint16_t port, const std::string& sample, double value, int timeout_ms = 10000);

// gtest expectations: `r` has `status` and OpenAI's error body (error.message, type, param, code).
void expect_error_shape(const Response& r, int status);

}  // namespace cadenza::server::testing
