// What the translators read from the Chat Completions side: a finished chat.completion body, or
// the chunks of a chat.completion.chunk stream, decoded into one neutral shape (choice 0 only: the
// converted requests never ask for n > 1). Both the server (its own GenerationJob's chunks) and
// the gateway (an upstream's SSE) feed the same decoder, so Messages and Responses come out alike.
// Thread-safety: pure functions; a StreamTranslator is plain state (one stream, one thread).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apishape/error.h"

namespace cadenza::apishape {

struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as generated
};

struct ChatResult {
  std::string model;
  std::string text;
  std::vector<ChatToolCall> calls;
  std::string finish_reason;  // "stop", "length", "tool_calls", ... ; empty: not finished
  // vLLM's `stop_reason` (Cadenza sends it too): the stop string that ended the text, if any.
  std::optional<std::string> stop_string;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // usage.prompt_tokens_details.cached_tokens: prompt tokens served from the prefix cache.
  int64_t cached_tokens = 0;
};

// Decodes a chat.completion body. An error when it is not one (no choices[0].message).
std::optional<ShapeError> decode_chat_body(const nlohmann::ordered_json& body, ChatResult& out);

// One event of a chat.completion.chunk, in order of appearance.
struct ChatDelta {
  enum class Kind { kText, kToolStart, kToolArguments, kFinish };
  Kind kind = Kind::kText;
  size_t tool_index = 0;  // kToolStart, kToolArguments: the call's index in the message
  std::string text;       // kText: content; kToolArguments: an arguments fragment
  std::string id, name;   // kToolStart
};

// Folds one chunk into `acc` (text, calls, finish, usage, model) and returns its events.
// Chunks of other choices than 0, and reasoning_content, are ignored.
std::vector<ChatDelta> decode_chat_chunk(const nlohmann::ordered_json& chunk, ChatResult& acc);

// A translator from a chat.completion.chunk stream to another API's SSE text.
class StreamTranslator {
 public:
  virtual ~StreamTranslator() = default;
  // One decoded chunk (the JSON of a `data:` event other than [DONE]); returns SSE text to send.
  virtual std::string on_chunk(const nlohmann::ordered_json& chunk) = 0;
  // The chat stream ended ([DONE] or its end): the closing events.
  virtual std::string finish() = 0;
  // The stream failed after it started: the API's error event(s). Nothing follows.
  virtual std::string fail(const ShapeError& e) = 0;
  // What the stream carried so far.
  virtual const ChatResult& result() const = 0;
};

// A random id: `prefix` then 24 hex digits.
std::string random_id(const std::string& prefix);

// A JSON object from generated argument text; text that is not a JSON object becomes {} (a
// model can stop mid-arguments at max_tokens).
nlohmann::ordered_json arguments_object(const std::string& arguments);

}  // namespace cadenza::apishape
