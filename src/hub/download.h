// One resumable HTTP(S) download with libcurl (what `cadenza pull` uses).
//
// Bytes go to `partial_path`. When that file exists, the request asks for the rest
// (Range: bytes=SIZE-) and appends; a server that ignores the range (200) restarts the file from
// zero, and one that answers 416 for a partial file as long as the whole is taken as complete.
// Redirects are followed (the hub redirects to a CDN); the Bearer token is sent only to the first
// host (libcurl drops custom Authorization headers on a redirect to another host).
// Errors are return values with a message naming the URL and what to do: 401/403 (token), 404,
// other HTTP statuses, network failures and interruptions (the partial file is kept for a resume).
// Thread-safety: download() may run on several threads at once (one easy handle each).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "util/result.h"

namespace cadenza::hub {

struct DownloadProgress {
  int64_t done = 0;    // bytes in the file so far (resumed bytes included)
  int64_t total = 0;   // 0: unknown
  double seconds = 0;  // since this transfer started
  int64_t resumed_from = 0;
};

struct DownloadOptions {
  std::string url;
  std::string partial_path;
  std::string bearer_token;  // empty: no Authorization header
  // The environment variable that holds the token, named in 401/403 messages.
  std::string token_env = "HF_TOKEN";
  long connect_timeout_s = 30;
  long stall_timeout_s = 60;  // abort when under 1 byte/s for this long
  // Called from the transfer's thread, at most every ~100 ms and once at the end.
  std::function<void(const DownloadProgress&)> on_progress;
};

struct DownloadResult {
  int64_t size = 0;          // bytes in partial_path at the end
  int64_t resumed_from = 0;  // bytes that were already there (0: from the start)
  std::string etag;          // ETag of the final response (as sent)
  std::string linked_etag;   // X-Linked-Etag of any response (the hub: the file's SHA-256)
  int http_status = 0;       // of the final response
};

Result<DownloadResult> download(const DownloadOptions& options);

// A small GET into memory (a hub's JSON API): redirects followed, the token sent as `download`
// sends it, at most `max_bytes` of body (more is an error, so a wrong URL cannot fill memory).
// Any status other than 200 is an error naming the URL and the status.
Result<std::string> fetch_text(const std::string& url, const std::string& bearer_token,
                               size_t max_bytes, long connect_timeout_s, long stall_timeout_s);

}  // namespace cadenza::hub
