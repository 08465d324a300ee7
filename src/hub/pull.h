// `cadenza pull`: fetch a GGUF model from the Hugging Face hub (hf://ORG/REPO/FILE.gguf), ModelScope
// (ms://ORG/REPO/FILE.gguf) or an http(s):// URL into a local folder, resumable, with the SHA-256 checked and the file validated
// as GGUF before it gets its final name.
//
//   hub::PullOptions o;  o.source =
//   "hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q8_0.gguf";
//   hub::apply_environment(o);               // HF_TOKEN, HF_ENDPOINT
//   auto r = hub::pull(o);                   // r->path: the local file
//
// Files: DIR/FILE where DIR is output_dir, else the cache (default_cache_dir()) +
// "hf/ORG/REPO/" (+ "REVISION/" when not main), "ms/ORG/REPO/" (+ "REVISION/" when not master)
// or "url/". Bytes arrive in FILE.partial (kept when
// interrupted: the next pull resumes it); FILE.lock keeps two pulls of the same file apart.
// Checksum: `sha256` when given, else for ms:// the Sha256 ModelScope's file-list API gives the
// file, else the hub's X-Linked-Etag or the final ETag when it is a SHA-256 (64 hex digits);
// without any, the file is not verified (reported through on_info).
// A mismatch or a file that is not valid GGUF deletes the download and is an error.
// An existing FILE is reused (checked against `sha256` when given) unless `force`.
// Thread-safety: pull() of different files may run concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "hub/download.h"
#include "hub/source.h"
#include "util/result.h"

namespace cadenza::hub {

struct PullOptions {
  std::string source;      // hf:// or ms://ORG/REPO[@REV]/FILE.gguf, or http(s)://.../FILE.gguf
  std::string output_dir;  // empty: the cache
  std::string endpoint;    // empty: the hub's own (https://huggingface.co, https://modelscope.cn)
  std::string token;       // Bearer token; sent only to the hub endpoint (token_allowed)
  std::string sha256;      // expected SHA-256 (64 hex); empty: the server's
  bool force = false;      // download again even when the file exists
  bool validate_gguf = true;
  long connect_timeout_s = 30;
  long stall_timeout_s = 60;
  std::function<void(const DownloadProgress&)> on_progress;
  std::function<void(const std::string&)> on_info;  // one-line status messages
};

struct PullResult {
  std::string path;
  bool downloaded = false;  // false: the file was already there
  int64_t size = 0;
  int64_t resumed_from = 0;  // bytes that a previous, interrupted pull had fetched
  std::string sha256;        // the verified digest; empty when not verified
};

Result<PullResult> pull(const PullOptions& options);

// Fills the empty token and endpoint from the environment of the source's hub: HF_TOKEN and
// HF_ENDPOINT (hf:// and URLs), MODELSCOPE_API_TOKEN and MODELSCOPE_ENDPOINT (else
// https://$MODELSCOPE_DOMAIN) for ms://.
void apply_environment(PullOptions& options);

// $CADENZA_CACHE_DIR, else $XDG_CACHE_HOME/cadenza, else $HOME/.cache/cadenza, else
// ./.cadenza-cache.
std::string default_cache_dir();

// "name  12.3 MiB / 400.0 MiB  3.1%  5.2 MiB/s  ETA 1m10s" (no newline).
std::string progress_line(const std::string& name, const DownloadProgress& p);

}  // namespace cadenza::hub
