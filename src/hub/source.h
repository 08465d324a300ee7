// What `cadenza pull` downloads: a model reference resolved to a URL and a local file name.
//
//   hf://ORG/REPO/FILE.gguf            -> {endpoint}/ORG/REPO/resolve/main/FILE.gguf
//   hf://ORG/REPO@REVISION/DIR/F.gguf  -> {endpoint}/ORG/REPO/resolve/REVISION/DIR/F.gguf
//   ms://ORG/REPO[@REVISION]/DIR/F.gguf -> {endpoint}/models/ORG/REPO/resolve/REVISION/DIR/F.gguf
//                                         (ModelScope; REVISION defaults to master)
//   https://host/path/F.gguf (or http://) -> as given
//
// `endpoint` is the hub the reference names: https://huggingface.co for hf:// and URLs,
// https://modelscope.cn for ms://, unless overridden (--endpoint, HF_ENDPOINT or
// MODELSCOPE_ENDPOINT: mirrors, tests).
// Names are checked: ORG and REPO are [A-Za-z0-9._-]+, no path segment is empty, "." or "..", and
// the file name ends in .gguf (case-insensitive). Path bytes outside [A-Za-z0-9._~/-] are
// percent-encoded in the URL.
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "util/result.h"

namespace cadenza::hub {

inline constexpr const char* kDefaultEndpoint = "https://huggingface.co";
inline constexpr const char* kModelScopeEndpoint = "https://modelscope.cn";

enum class Hub { kNone, kHuggingFace, kModelScope };

struct Source {
  std::string url;        // what to GET
  std::string file_name;  // the last path segment (the local file name)
  // For hub sources "ORG/REPO" (the cache sub-folder), the revision and the file's path in the
  // repository (DIR/F.gguf, not encoded); empty for URLs.
  std::string repo;
  std::string revision;
  std::string path;
  Hub hub = Hub::kNone;
  bool is_hub = false;  // hf:// or ms:// (the token may be sent)
  // ms:// only: the ModelScope API listing the repository's files with their SHA-256
  // ({endpoint}/api/v1/models/ORG/REPO/repo/files?Revision=REV&Recursive=true).
  std::string file_list_url;
};

// The hub a reference names (hf:// or ms://), kNone for URLs and anything else.
Hub hub_of(const std::string& ref);

// The default endpoint of a hub (kNone: the Hugging Face one, which URLs compare against).
const char* default_endpoint(Hub hub);

// True for hf://, ms://, http:// and https:// references (what `serve -m` hands to pull()).
bool is_remote(const std::string& ref);

Result<Source> resolve_source(const std::string& ref, const std::string& endpoint);

// Whether a Bearer token may go to `url`: only to the hub's own endpoint (never to other hosts).
bool token_allowed(const Source& source, const std::string& endpoint);

}  // namespace cadenza::hub
