#include "hub/download.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string_view>

namespace cadenza::hub {
namespace {

using Clock = std::chrono::steady_clock;

void init_curl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// What every request of pull makes the same way: HTTP(S) only (redirects too, at most 10), our
// User-Agent, no signals (threads), the error text into `errbuf`, and the two timeouts (a
// transfer under 1 byte/s for `stall_timeout_s` is dropped).
void set_common_options(CURL* c, const std::string& url, char* errbuf, long connect_timeout_s,
                        long stall_timeout_s) {
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "cadenza-pull/0.1");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, connect_timeout_s);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, stall_timeout_s);
}

bool iequals_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) !=
        std::tolower(static_cast<unsigned char>(name[i])))
      return false;
  return true;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == '\r' || s.back() == '\n' || s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return std::string(s);
}

// "bytes A-B/T" -> A (and T, -1 when "*"); "bytes */T" -> A = -1. false when unparsable.
bool parse_content_range(const std::string& v, int64_t& first, int64_t& total) {
  first = -1;
  total = -1;
  if (v.rfind("bytes ", 0) != 0) return false;
  const std::string r = v.substr(6);
  const size_t slash = r.find('/');
  if (slash == std::string::npos) return false;
  const std::string range = r.substr(0, slash), tot = r.substr(slash + 1);
  if (tot != "*") {
    char* end = nullptr;
    total = std::strtoll(tot.c_str(), &end, 10);
    if (end == tot.c_str() || *end) return false;
  }
  if (range != "*") {
    char* end = nullptr;
    first = std::strtoll(range.c_str(), &end, 10);
    if (end == range.c_str() || *end != '-') return false;
  }
  return true;
}

// A short, printable excerpt of an error body.
std::string excerpt(const std::string& body) {
  std::string out;
  for (char c : body.substr(0, 300)) out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  return trim(out);
}

struct Transfer {
  const DownloadOptions* opt = nullptr;
  int64_t offset = 0;  // bytes in the file before this transfer
  // The response being received (reset at each status line: redirects make several).
  int status = 0;
  std::string etag, linked_etag, content_range;
  int64_t content_length = -1;
  // The body, set up at its first byte.
  bool started = false;
  std::FILE* file = nullptr;
  int64_t written = 0;
  std::string error_body;   // of a status >= 300 (first 2 KiB)
  std::string local_error;  // disk full, an unexpected Content-Range
  Clock::time_point t0, last_progress;

  ~Transfer() {
    if (file) std::fclose(file);
  }
  bool ok_status() const { return status == 200 || status == 206; }

  bool begin_body() {
    started = true;
    if (status == 206) {
      int64_t first = 0, total = 0;
      if (!parse_content_range(content_range, first, total) || first != offset) {
        local_error = fmt::format(
            "the server resumed at the wrong place (Content-Range '{}', "
            "expected bytes {}-)",
            content_range, offset);
        return false;
      }
      file = std::fopen(opt->partial_path.c_str(), "ab");
    } else if (status == 200) {
      offset = 0;  // the whole file (the server ignored or was not asked for a range)
      file = std::fopen(opt->partial_path.c_str(), "wb");
    } else {
      return true;  // an error body: kept in memory
    }
    if (!file) {
      local_error = fmt::format("cannot write '{}': {}", opt->partial_path, std::strerror(errno));
      return false;
    }
    return true;
  }

  void report(bool final) {
    if (!opt->on_progress) return;
    const auto now = Clock::now();
    if (!final && now - last_progress < std::chrono::milliseconds(100)) return;
    last_progress = now;
    DownloadProgress p;
    p.done = offset + written;
    p.total = content_length >= 0 && ok_status() ? offset + content_length : 0;
    p.seconds = std::chrono::duration<double>(now - t0).count();
    p.resumed_from = offset;
    opt->on_progress(p);
  }
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const std::string_view line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    // A new response (the first, or the next after a redirect).
    const size_t sp = line.find(' ');
    t.status =
        sp == std::string_view::npos ? 0 : std::atoi(std::string(line.substr(sp + 1, 3)).c_str());
    t.etag.clear();
    t.content_range.clear();
    t.content_length = -1;
    t.started = false;
    t.error_body.clear();
  } else if (iequals_prefix(line, "etag:")) {
    t.etag = trim(line.substr(5));
  } else if (iequals_prefix(line, "x-linked-etag:")) {
    t.linked_etag = trim(line.substr(14));
  } else if (iequals_prefix(line, "content-range:")) {
    t.content_range = trim(line.substr(14));
  } else if (iequals_prefix(line, "content-length:")) {
    t.content_length = std::strtoll(trim(line.substr(15)).c_str(), nullptr, 10);
  }
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const size_t len = size * n;
  if (!t.started && !t.begin_body()) return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  if (!t.ok_status()) {
    if (t.error_body.size() < 2048) t.error_body.append(data, std::min<size_t>(len, 2048));
    return len;
  }
  if (std::fwrite(data, 1, len, t.file) != len) {
    t.local_error = fmt::format("cannot write '{}': {}", t.opt->partial_path, std::strerror(errno));
    return 0;
  }
  t.written += static_cast<int64_t>(len);
  t.report(false);
  return len;
}

int on_xferinfo(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  static_cast<Transfer*>(user)->report(false);
  return 0;
}

int64_t file_size(const std::string& path) {
  std::error_code ec;
  const auto s = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(s);
}

enum class Outcome { kDone, kRestart };

Result<Outcome> attempt(const DownloadOptions& o, DownloadResult& result) {
  Transfer t;
  t.opt = &o;
  t.offset = file_size(o.partial_path);
  t.t0 = t.last_progress = Clock::now();

  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return Error("libcurl: cannot create a handle");
  CURL* c = curl.get();
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  if (!o.bearer_token.empty())
    headers = curl_slist_append(headers, ("Authorization: Bearer " + o.bearer_token).c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_guard(headers,
                                                                           curl_slist_free_all);
  const std::string range = fmt::format("{}-", t.offset);
  set_common_options(c, o.url, errbuf, o.connect_timeout_s, o.stall_timeout_s);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_xferinfo);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  if (headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  if (t.offset > 0) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());

  const CURLcode rc = curl_easy_perform(c);
  if (t.file) {
    const bool flushed = std::fflush(t.file) == 0;
    std::fclose(t.file);
    t.file = nullptr;
    if (!flushed && t.local_error.empty())
      t.local_error = fmt::format("cannot write '{}': {}", o.partial_path, std::strerror(errno));
  }
  if (!t.linked_etag.empty()) result.linked_etag = t.linked_etag;
  result.http_status = t.status;
  const int64_t have = file_size(o.partial_path);
  const std::string curl_msg = errbuf[0]
                                   ? fmt::format("{} ({})", curl_easy_strerror(rc), trim(errbuf))
                                   : std::string(curl_easy_strerror(rc));

  if (!t.local_error.empty()) return make_error("{}: {}", o.url, t.local_error);
  if (rc != CURLE_OK) {
    if (t.status == 0) return make_error("cannot download {}: {}", o.url, curl_msg);
    if (t.ok_status())
      return make_error(
          "download of {} interrupted after {} bytes: {}; the bytes received are "
          "kept in '{}': run the same command again to resume",
          o.url, have, curl_msg, o.partial_path);
    return make_error("download of {} failed (HTTP {}): {}", o.url, t.status, curl_msg);
  }
  if (t.status == 416 && t.offset > 0) {
    int64_t first = 0, total = -1;
    parse_content_range(t.content_range, first, total);
    if (total == t.offset) {  // the partial file already holds everything
      result.size = t.offset;
      result.resumed_from = t.offset;
      result.etag = t.etag;
      return Outcome::kDone;
    }
    return Outcome::kRestart;
  }
  if (t.status == 401 || t.status == 403) {
    const std::string why = excerpt(t.error_body);
    if (o.bearer_token.empty())
      return make_error(
          "HTTP {} from {}: the file needs a token (or the repository does not "
          "exist): set {} to an access token with read access{}{}",
          t.status, o.url, o.token_env, why.empty() ? "" : "; the server says: ", why);
    return make_error(
        "HTTP {} from {}: the token in {} was refused (no access to this "
        "repository, or the repository does not exist){}{}",
        t.status, o.url, o.token_env, why.empty() ? "" : "; the server says: ", why);
  }
  if (t.status == 404)
    return make_error(
        "HTTP 404 from {}: not found (check the organisation, repository, revision "
        "and file name)",
        o.url);
  if (!t.ok_status()) {
    const std::string why = excerpt(t.error_body);
    return make_error("HTTP {} from {}{}{}", t.status, o.url, why.empty() ? "" : ": ", why);
  }
  if (!t.started) {  // 200 with an empty body: an empty file
    if (t.status == 200) {
      std::FILE* f = std::fopen(o.partial_path.c_str(), "wb");
      if (!f) return make_error("cannot write '{}': {}", o.partial_path, std::strerror(errno));
      std::fclose(f);
      t.offset = 0;
    }
  }
  if (t.content_length >= 0 && t.written != t.content_length)
    return make_error("download of {} ended after {} of {} bytes; run again to resume", o.url,
                      t.written, t.content_length);
  t.report(true);
  result.size = file_size(o.partial_path);
  result.resumed_from = t.offset;
  result.etag = t.etag;
  return Outcome::kDone;
}

}  // namespace

Result<DownloadResult> download(const DownloadOptions& options) {
  init_curl();
  DownloadResult result;
  for (int i = 0; i < 2; ++i) {
    auto outcome = attempt(options, result);
    if (!outcome) return outcome.error_value();
    if (*outcome == Outcome::kDone) return result;
    // 416 for a partial file that does not match the remote size: start over once.
    std::error_code ec;
    std::filesystem::remove(options.partial_path, ec);
  }
  return make_error("{}: the server refuses every byte range (HTTP 416)", options.url);
}

namespace {

struct TextSink {
  std::string body;
  size_t max_bytes = 0;
  bool too_big = false;
};

size_t on_text(char* data, size_t size, size_t n, void* user) {
  auto& sink = *static_cast<TextSink*>(user);
  const size_t len = size * n;
  if (sink.body.size() + len > sink.max_bytes) {
    sink.too_big = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  sink.body.append(data, len);
  return len;
}

}  // namespace

Result<std::string> fetch_text(const std::string& url, const std::string& bearer_token,
                               size_t max_bytes, long connect_timeout_s, long stall_timeout_s) {
  init_curl();
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return Error("libcurl: cannot create a handle");
  CURL* c = curl.get();
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  if (!bearer_token.empty())
    headers = curl_slist_append(headers, ("Authorization: Bearer " + bearer_token).c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_guard(headers,
                                                                           curl_slist_free_all);
  TextSink sink;
  sink.max_bytes = max_bytes;
  set_common_options(c, url, errbuf, connect_timeout_s, stall_timeout_s);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_text);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  const CURLcode rc = curl_easy_perform(c);
  if (sink.too_big) return make_error("{}: the answer is larger than {} bytes", url, max_bytes);
  if (rc != CURLE_OK)
    return make_error("cannot fetch {}: {}", url,
                      errbuf[0] ? fmt::format("{} ({})", curl_easy_strerror(rc), trim(errbuf))
                                : std::string(curl_easy_strerror(rc)));
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) return make_error("HTTP {} from {}", status, url);
  return sink.body;
}

}  // namespace cadenza::hub
