// What `cadenza pull` downloads: a model reference resolved to a URL and a local file name.
//
//   hf://ORG/REPO/FILE.gguf            -> {endpoint}/ORG/REPO/resolve/main/FILE.gguf
//   hf://ORG/REPO@REVISION/DIR/F.gguf  -> {endpoint}/ORG/REPO/resolve/REVISION/DIR/F.gguf
//   https://host/path/F.gguf (or http://) -> as given
//
// `endpoint` is https://huggingface.co unless overridden (--endpoint, HF_ENDPOINT: mirrors, tests).
// Names are checked: ORG and REPO are [A-Za-z0-9._-]+, no path segment is empty, "." or "..", and
// the file name ends in .gguf (case-insensitive). Path bytes outside [A-Za-z0-9._~/-] are
// percent-encoded in the URL.
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "util/result.h"

namespace cadenza::hub {

inline constexpr const char* kDefaultEndpoint = "https://huggingface.co";

struct Source {
  std::string url;        // what to GET
  std::string file_name;  // the last path segment (the local file name)
  // For hf:// sources "ORG/REPO" (the cache sub-folder) and the revision; empty for URLs.
  std::string repo;
  std::string revision;
  bool is_hub = false;  // hf:// (the token may be sent)
};

// True for hf://, http:// and https:// references (what `serve -m` hands to pull()).
bool is_remote(const std::string& ref);

Result<Source> resolve_source(const std::string& ref, const std::string& endpoint);

// Whether a Bearer token may go to `url`: only to the hub's own endpoint (never to other hosts).
bool token_allowed(const Source& source, const std::string& endpoint);

}  // namespace cadenza::hub
