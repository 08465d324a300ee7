#include "webui/webui.h"

#include "webui/assets.h"

namespace cadenza::webui {

namespace {

constexpr std::string_view kPrefix = "/webui/";

const Asset* find(std::string_view file) {
  for (const Asset& a : assets())
    if (a.path == file) return &a;
  return nullptr;
}

Response plain(int status, std::string_view message) {
  Response r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = message;
  r.headers = security_headers();
  return r;
}

}  // namespace

bool is_console_path(std::string_view path) {
  return path == "/" || path.rfind(kPrefix, 0) == 0;
}

std::vector<std::pair<std::string, std::string>> security_headers() {
  // Scripts and styles only from this server (the bundle has no inline script); 'unsafe-inline'
  // styles for the style attributes that the highlighter and the chart library set. connect-src
  // 'self': the page talks to this server only.
  return {{"Content-Security-Policy",
           "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
           "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
           "manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
          {"X-Content-Type-Options", "nosniff"},
          {"X-Frame-Options", "DENY"},
          {"Referrer-Policy", "no-referrer"},
          {"Cross-Origin-Opener-Policy", "same-origin"},
          {"Cross-Origin-Resource-Policy", "same-origin"},
          {"Permissions-Policy", "camera=(), microphone=(), geolocation=()"}};
}

Response serve(std::string_view method, std::string_view path, std::string_view if_none_match) {
  if (method != "GET" && method != "HEAD") {
    Response r = plain(405, "the web console answers GET and HEAD only\n");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  const std::string_view file = path == "/" ? std::string_view("index.html")
                                            : path.substr(std::min(path.size(), kPrefix.size()));
  const Asset* a = file.empty() ? nullptr : find(file);
  if (!a) return plain(404, "no such file in the web console\n");
  Response r;
  r.headers = security_headers();
  r.headers.emplace_back("ETag", std::string(a->etag));
  // Revalidated on every load (a 304 when unchanged): a new binary's console is never stale.
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.content_type = std::string(a->content_type);
  if (!if_none_match.empty() && if_none_match.find(a->etag) != std::string_view::npos) {
    r.status = 304;
    return r;
  }
  r.body = a->body;
  return r;
}

}  // namespace cadenza::webui
