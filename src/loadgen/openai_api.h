// The OpenAI-compatible wire format as the load generator uses it: streaming request bodies for
// /v1/chat/completions and /v1/completions, and the content of each streamed chunk.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "loadgen/workload.h"
#include "util/result.h"

namespace cadenza::loadgen {

enum class ApiKind { chat, completions };

struct RequestOptions {
  ApiKind api = ApiKind::chat;
  std::string model;
  bool ignore_eos = false;  // sends "ignore_eos": true (a vLLM/llama.cpp/Cadenza extension)
};

// JSON body with stream: true, stream_options.include_usage: true, max_tokens = item.max_tokens.
std::string build_request_body(const WorkItem& item, const RequestOptions& options);

struct ChunkInfo {
  bool done = false;                     // the "[DONE]" sentinel
  std::string content;                   // generated text in this chunk (delta.content or
                                         // delta.reasoning_content for chat, text for completions)
  std::optional<int32_t> prompt_tokens;  // from "usage", when present
  std::optional<int32_t> completion_tokens;  // from "usage", when present
  std::string finish_reason;                 // "" while generating
};

// Parses one SSE data payload. Errors: not JSON, not an object, or an {"error": ...} object (the
// message is the server's).
Result<ChunkInfo> parse_chunk(std::string_view data, ApiKind api);

}  // namespace cadenza::loadgen
