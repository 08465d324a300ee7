// GenerationJob: turns one API request's engine outputs (n choices) into OpenAI responses: SSE
// chunks while streaming, or one JSON body at the end.
//
// Chunk shapes (stream):
//   completions: {"id":"cmpl-..","object":"text_completion","created":T,"model":M,
//                 "choices":[{"index":i,"text":"..","logprobs":null,"finish_reason":null|"stop"}]}
//   chat:        {"id":"chatcmpl-..","object":"chat.completion.chunk",...,
//                 "choices":[{"index":i,"delta":{"role":"assistant","content":""}|{"content":".."}|{},
//                             "logprobs":null,"finish_reason":..}]}
//   with include_usage every chunk has "usage":null and a last chunk has "choices":[] and usage;
//   then "data: [DONE]".
// Ownership: plain state. Thread-safety: none (the connection's strand only).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apishape/chat_result.h"
#include "apishape/error.h"
#include "server/engine_bridge.h"
#include "server/openai_protocol.h"
#include "toolcall/streaming.h"
#include "toolcall/tool_call.h"

namespace cadenza::server {

// How a chat choice's text is split into content, reasoning_content and tool_calls (src/toolcall).
// Inactive (the default): the text is the content.
struct OutputParsing {
  toolcall::ToolCallFormat tools = toolcall::ToolCallFormat::kNone;  // kNone: no tool calls
  toolcall::ParseOptions options;  // the reasoning format; ids derive from options.id_seed
  bool active() const {
    return tools != toolcall::ToolCallFormat::kNone ||
           options.reasoning != toolcall::ReasoningFormat::kNone;
  }
};

// The API a chat generation answers in (src/apishape): chat itself, or Anthropic Messages /
// OpenAI Responses translated from the chat chunks and body that the job builds.
struct OutputShape {
  apishape::Api api = apishape::Api::kChat;
  // Streaming: the chat chunks (and the usage chunk) go through it instead of out as SSE.
  std::unique_ptr<apishape::StreamTranslator> stream;
  // Non-streaming: the chat.completion body -> the API's body.
  std::function<nlohmann::ordered_json(const nlohmann::ordered_json&)> body;
  // Called once with the final body (non-streaming) or after the stream's closing events (then
  // with null): where a finished response is kept (the Responses store).
  std::function<void(const nlohmann::ordered_json&)> finished;
};

class GenerationJob {
 public:
  // The tokenizer (borrowed; must outlive the job) renders logprob token strings.
  // `parsing` (chat only): with tools or a reasoning format, each choice's text goes through a
  // toolcall::StreamingToolParser: streamed deltas carry content, reasoning_content and
  // tool_calls (OpenAI's shape: {index, id, type, function: {name, arguments}} first, argument
  // fragments after), and a choice that called a tool finishes with "tool_calls".
  GenerationJob(const CompletionRequest& request, std::string model_name, int32_t prompt_tokens,
                const Tokenizer& tokenizer, OutputParsing parsing = {});

  bool stream() const { return stream_; }
  // Answers in another API (chat requests only; the request must ask for include_usage when
  // streaming so that the translator sees the usage).
  void set_shape(OutputShape shape) { shape_ = std::move(shape); }
  apishape::Api api() const { return shape_.api; }
  // Streaming: the events that end a stream that failed after it started, in the job's API.
  std::string stream_error(const ApiError& e);
  // Feeds one engine event. Streaming: returns the SSE text to send now (possibly empty).
  std::string on_event(const GenEvent& e);
  // True when every choice has finished.
  bool done() const { return finished_ == static_cast<int32_t>(choices_.size()); }
  // Set when a choice was rejected or failed before anything was sent: the whole request fails
  // with this error (the caller aborts the others).
  const std::optional<ApiError>& error() const { return error_; }
  // Streaming: whether any SSE event has been produced yet.
  bool started() const { return started_; }
  // Streaming, after done(): the usage chunk (if asked) and [DONE].
  std::string stream_tail();
  // Non-streaming, after done(): the response body.
  nlohmann::ordered_json body();

  int32_t completion_tokens() const;
  int32_t prompt_tokens() const { return prompt_tokens_; }

 private:
  struct Choice {
    std::string text;
    nlohmann::ordered_json logprobs;  // the choice's logprobs object so far (non-streamed)
    int32_t tokens = 0;
    bool role_sent = false;
    bool finished = false;
    std::string finish_reason;
    std::string stop_string;  // the stop string that ended it (vLLM's stop_reason), if any
    // With OutputParsing active: the parser and what it settled (text above stays the raw text).
    std::optional<toolcall::StreamingToolParser> parser;
    std::string content, reasoning;
    std::vector<toolcall::ToolCall> calls;
  };
  // Feeds the choice's parser (`finish`: the end of its text) and folds the events into it.
  std::vector<toolcall::OutputDelta> parse(Choice& c, const std::string& text, bool finish);
  // The chat message of a finished choice (parsed fields when a parser ran).
  nlohmann::ordered_json message(const Choice& c) const;
  // The chat SSE chunks of parser events (one per event kind run).
  std::string delta_chunks(size_t index, const std::vector<toolcall::OutputDelta>& events,
                           const nlohmann::ordered_json& logprobs);
  nlohmann::ordered_json chunk(nlohmann::ordered_json choices) const;
  // One chunk as SSE, or through the shape's translator.
  std::string emit(const nlohmann::ordered_json& chunk);
  nlohmann::ordered_json chat_body() const;
  nlohmann::ordered_json usage() const;
  // The OpenAI logprobs object for `entries` (completions: tokens/token_logprobs/top_logprobs/
  // text_offset starting at `text_offset`; chat: {"content": [...]}); null when not requested.
  nlohmann::ordered_json logprobs_json(const std::vector<engine::TokenLogprob>& entries,
                                       size_t text_offset) const;
  void append_logprobs(nlohmann::ordered_json& into, const nlohmann::ordered_json& more) const;

  const Tokenizer& tokenizer_;
  int32_t logprobs_ = -1;
  Endpoint endpoint_;
  bool stream_;
  bool include_usage_;
  std::string id_;
  int64_t created_;
  std::string model_;
  int32_t prompt_tokens_;
  int32_t cached_tokens_ = 0;  // usage.prompt_tokens_details.cached_tokens
  OutputParsing parsing_;
  std::vector<Choice> choices_;
  int32_t finished_ = 0;
  bool started_ = false;
  std::optional<ApiError> error_;
  OutputShape shape_;
};

// An error reply body in `api`'s shape.
nlohmann::ordered_json shaped_error_body(apishape::Api api, const ApiError& e);

// A random id such as "cmpl-3f9a..." (24 hex digits after the prefix).
std::string random_id(const std::string& prefix);

}  // namespace cadenza::server
