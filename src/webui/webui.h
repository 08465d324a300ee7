// Answers the web console's requests for `cadenza serve` and `cadenza gateway` (docs/webui.md):
// GET / is index.html, GET /webui/FILE is an embedded file of webui/dist (assets.h). Everything
// is in the binary: the page fetches nothing from elsewhere (its Content-Security-Policy says so).
// Thread-safety: pure functions over immutable data.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cadenza::webui {

struct Response {
  int status = 200;  // 200, 304 (If-None-Match matched), 404 (no such file), 405 (not GET/HEAD)
  std::string content_type;
  std::string_view body;  // static storage (an embedded file or a constant message)
  std::vector<std::pair<std::string, std::string>> headers;  // CSP, nosniff, ETag, caching...
};

// Is `path` (the request target without its query) one of the console's: "/" or "/webui/..."?
bool is_console_path(std::string_view path);

// The answer to `method` ("GET", "HEAD", ...) on a console path. `if_none_match`: the request's
// If-None-Match header (empty when absent).
Response serve(std::string_view method, std::string_view path, std::string_view if_none_match);

// The security headers every console response carries (also on its 404s).
std::vector<std::pair<std::string, std::string>> security_headers();

}  // namespace cadenza::webui
