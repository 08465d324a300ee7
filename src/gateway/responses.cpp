#include "gateway/responses.h"

#include <atomic>
#include <chrono>
#include <random>

#include <boost/beast/http/status.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace cadenza::gateway {

std::string error_json(std::string_view message, std::string_view type, std::string_view code) {
  nlohmann::ordered_json e;
  e["error"]["message"] = message;
  e["error"]["type"] = type;
  e["error"]["param"] = nullptr;
  e["error"]["code"] = code;
  return e.dump();
}

Reply error_reply(int status, std::string_view message, std::string_view type,
                  std::string_view code) {
  Reply r;
  r.status = status;
  r.body = error_json(message, type, code);
  return r;
}

namespace {

std::string status_line(int status) {
  return fmt::format(
      "HTTP/1.1 {} {}\r\n", status,
      std::string(boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(status))));
}

}  // namespace

std::string render_reply(const Reply& r, const std::string& request_id, bool keep_alive,
                         bool head_only) {
  std::string out = status_line(r.status);
  out += "Server: cadenza-gateway\r\n";
  out += fmt::format("X-Request-Id: {}\r\n", request_id);
  for (const auto& [k, v] : r.headers) out += fmt::format("{}: {}\r\n", k, v);
  out += fmt::format("Content-Type: {}\r\nContent-Length: {}\r\n", r.content_type, r.body.size());
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  if (!head_only) out += r.body;
  return out;
}

std::string render_stream_head(const std::string& request_id, const std::string& upstream,
                               bool keep_alive) {
  std::string out = status_line(200);
  out += "Server: cadenza-gateway\r\n";
  out += fmt::format("X-Request-Id: {}\r\nX-Cadenza-Upstream: {}\r\n", request_id, upstream);
  out += "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
         "Transfer-Encoding: chunked\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return out;
}

bool acceptable_request_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id)
    if (c < 0x21 || c > 0x7e) return false;
  return true;
}

std::string new_request_id() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t base = std::random_device{}() ^
                               static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return fmt::format("gw-{:016x}", base * 0x9e3779b97f4a7c15ull + counter.fetch_add(1));
}

}  // namespace cadenza::gateway
