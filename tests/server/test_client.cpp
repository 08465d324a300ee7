#include "test_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <limits>
#include <sstream>

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace cadenza::server::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

Client::Client(uint16_t port) : socket_(ioc_) {
  boost::system::error_code ec;
  socket_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  connected_ = !ec;
}

Client::~Client() { close(); }

void Client::close() {
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  connected_ = false;
}

Response Client::request(const std::string& method, const std::string& target,
                         const std::string& body,
                         const std::map<std::string, std::string>& headers) {
  Response r;
  if (!connected_) return r;
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
  }
  boost::system::error_code ec;
  http::write(socket_, req, ec);
  if (ec) return r;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::numeric_limits<uint64_t>::max());
  if (method == "HEAD") parser.skip(true);
  http::read(socket_, buffer, parser, ec);
  if (ec) return r;
  auto res = parser.release();
  r.ok = true;
  r.status = static_cast<int>(res.result_int());
  r.body = res.body();
  for (const auto& f : res) {
    std::string name(f.name_string().data(), f.name_string().size());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = std::string(f.value().data(), f.value().size());
  }
  if (!res.keep_alive()) close();
  return r;
}

bool Client::send_raw(const std::string& bytes) {
  boost::system::error_code ec;
  net::write(socket_, net::buffer(bytes), ec);
  return !ec;
}

std::string Client::read_some() {
  char buf[4096];
  boost::system::error_code ec;
  const size_t n = socket_.read_some(net::buffer(buf), ec);
  return ec ? std::string() : std::string(buf, n);
}

std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  }
  return out;
}

Response get(uint16_t port, const std::string& target) { return Client(port).get(target); }

Response post(uint16_t port, const std::string& target, const nlohmann::json& body,
              const std::map<std::string, std::string>& headers) {
  return Client(port).post(target, body, headers);
}

double metric_value(const std::string& text, const std::string& sample) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
  }
  return std::nan("");
}

std::string mutate(std::string body, std::mt19937& rng) {
  for (unsigned m = rng() % 3 + 1; m > 0; --m) {
    const size_t at = rng() % body.size();
    const std::string head = body.substr(0, at);
    switch (rng() % 3) {
      case 0: body = head + static_cast<char>(rng() % 256) + body.substr(at + 1); break;
      case 1: body = head + body.substr(std::min(body.size(), at + 1 + rng() % 4)); break;
      default: body = head + "{}[]\",:0-e"[rng() % 10] + body.substr(at); break;
    }
    if (body.empty()) body.push_back('{');
  }
  return body;
}

bool wait_metric(uint16_t port, const std::string& sample, double value, int timeout_ms) {
  for (int i = 0; i < timeout_ms / 20; ++i) {
    auto m = get(port, "/metrics");
    if (m.ok && metric_value(m.body, sample) == value) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void expect_error_shape(const Response& r, int status) {
  EXPECT_EQ(r.status, status) << r.body;
  nlohmann::json j = r.json();
  ASSERT_TRUE(j.is_object()) << r.body;
  ASSERT_TRUE(j.contains("error")) << r.body;
  const nlohmann::json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string());
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_TRUE(e.contains("param"));
  EXPECT_TRUE(e.contains("code"));
}

}  // namespace cadenza::server::testing
