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
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/engine_bridge.h"
#include "server/openai_protocol.h"

namespace cadenza::server {

class GenerationJob {
 public:
  // The tokenizer (borrowed; must outlive the job) renders logprob token strings.
  GenerationJob(const CompletionRequest& request, std::string model_name, int32_t prompt_tokens,
                const Tokenizer& tokenizer);

  bool stream() const { return stream_; }
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
  std::string stream_tail() const;
  // Non-streaming, after done(): the response body.
  nlohmann::ordered_json body() const;

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
  };
  nlohmann::ordered_json chunk(nlohmann::ordered_json choices) const;
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
  std::vector<Choice> choices_;
  int32_t finished_ = 0;
  bool started_ = false;
  std::optional<ApiError> error_;
};

// A random id such as "cmpl-3f9a..." (24 hex digits after the prefix).
std::string random_id(const std::string& prefix);

}  // namespace cadenza::server
