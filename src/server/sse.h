// Server-sent events framing over HTTP/1.1 chunked transfer encoding.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

namespace cadenza::server {

// One SSE event carrying `data` (a single line of JSON, or "[DONE]"): "data: ...\n\n".
inline std::string sse_event(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 8);
  out += "data: ";
  out += data;
  out += "\n\n";
  return out;
}

// One HTTP/1.1 chunk holding `payload` (must not be empty: an empty chunk ends the body).
inline std::string http_chunk(std::string_view payload) {
  return fmt::format("{:x}\r\n{}\r\n", payload.size(), payload);
}

// The last chunk of a chunked body.
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace cadenza::server
