// HTTP responses written by the gateway itself: status line and headers, OpenAI-shaped error
// bodies, request ids (SSE and chunk framing: src/wire/sse.h). Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cadenza::gateway {

struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// {"error": {"message", "type", "param": null, "code"}} as OpenAI sends it.
std::string error_json(std::string_view message, std::string_view type, std::string_view code);
Reply error_reply(int status, std::string_view message, std::string_view type,
                  std::string_view code);

// The full HTTP/1.1 response (head and body) with Content-Length.
std::string render_reply(const Reply& r, const std::string& request_id, bool keep_alive,
                         bool head_only);
// The head of a chunked SSE response.
std::string render_stream_head(const std::string& request_id, const std::string& upstream,
                               bool keep_alive);

// A client X-Request-Id is passed through when it is 1..128 printable ASCII characters.
bool acceptable_request_id(std::string_view id);
std::string new_request_id();

}  // namespace cadenza::gateway
