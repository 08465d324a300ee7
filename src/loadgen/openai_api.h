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
  // Sampling sent with every request. temperature is always sent (0: greedy, the default, as
  // vLLM's benchmark does, so runs do not depend on a server's sampling defaults); top_p and
  // top_k only when set (>= 0; top_k is a vLLM/llama.cpp/Cadenza extension).
  double temperature = 0;
  double top_p = -1;
  int32_t top_k = -1;
};

// JSON body with stream: true, stream_options.include_usage: true, max_tokens = item.max_tokens,
// temperature (and top_p / top_k when set).
std::string build_request_body(const WorkItem& item, const RequestOptions& options);

struct ChunkInfo {
  bool done = false;                     // the "[DONE]" sentinel
  std::string content;                   // generated text in this chunk (delta.content or
                                         // delta.reasoning_content for chat, text for completions)
  // The chunk carries generated output (one token, or several when a server packs them), even
  // when its text is empty: OpenAI-compatible servers send one chunk per generated token, with
  // empty text while the token's bytes are held back (part of a UTF-8 character) or have no text
  // (a special token). Not a token: the chat role announcement ({"role":"assistant",
  // "content":""}), a finish-only chunk (delta {}, or empty text with a finish_reason), usage.
  bool token = false;
  // A choice chunk with a finish_reason and no text. Usually it only closes the choice
  // (llama.cpp's server), but vLLM and Cadenza put the finish_reason on the last token's chunk,
  // whose text may be empty: the runner counts it as that token when the server's usage says a
  // token is missing.
  bool empty_finish = false;
  std::optional<int32_t> prompt_tokens;  // from "usage", when present
  std::optional<int32_t> completion_tokens;  // from "usage", when present
  std::string finish_reason;                 // "" while generating
};

// Parses one SSE data payload. Errors: not JSON, not an object, or an {"error": ...} object (the
// message is the server's).
Result<ChunkInfo> parse_chunk(std::string_view data, ApiKind api);

}  // namespace cadenza::loadgen
