// OpenAI Responses API (POST /v1/responses) <-> OpenAI Chat Completions.
//
// Request (responses_to_chat): model, input (a string, or a list of items: messages with role
// user/system/developer/assistant and content a string or input_text/output_text parts,
// function_call and function_call_output items), instructions, max_output_tokens, temperature,
// top_p, stream, tools (type function), tool_choice, parallel_tool_calls, text.format
// (text, json_object, json_schema -> response_format), store, previous_response_id (the caller
// resolves it to the stored items, which become the prefix of the input). Tolerated and ignored:
// metadata, user, service_tier, prompt_cache_key, safety_identifier, truncation "disabled",
// background false, include [], reasoning null, text.verbosity. Anything else is a 400 naming it.
// Response (chat_to_response): {"id":"resp_..","object":"response","created_at","status":
// "completed"|"incomplete","output":[message items (output_text) and function_call items],
// "usage":{"input_tokens","output_tokens","total_tokens",...}, the request's settings echoed}.
// Stream (ResponsesStream): response.created, response.in_progress, then per output item
// response.output_item.added, (message) response.content_part.added, response.output_text.delta,
// response.output_text.done, response.content_part.done, (function_call)
// response.function_call_arguments.delta/.done, response.output_item.done; then
// response.completed (or response.incomplete at max_output_tokens). Every event carries
// sequence_number (0, 1, ...) and goes out as "event: TYPE\ndata: JSON\n\n". A failure
// mid-stream is a response.failed event.
// Thread-safety: pure functions; a ResponsesStream is plain state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "apishape/chat_result.h"
#include "apishape/error.h"

namespace cadenza::apishape {

struct ResponsesRequest {
  std::optional<ShapeError> error;
  nlohmann::ordered_json chat;  // a Chat Completions body
  bool stream = false;
  bool store = true;
  std::string previous_response_id;  // as sent; empty when absent
  // The conversation as Responses input items: the previous response's items (if given) and then
  // this request's input, each normalised to an object with a "type" (what a store keeps).
  nlohmann::ordered_json items;
  // The request's settings that the response object echoes (instructions, model,
  // max_output_tokens, temperature, top_p, tools, tool_choice, text, parallel_tool_calls,
  // previous_response_id, store, metadata).
  nlohmann::ordered_json echo;
};

// Reads only previous_response_id (so that the caller can look it up before converting).
// Empty when absent; an error when it is not a string.
std::optional<ShapeError> previous_response_id(const nlohmann::ordered_json& body, std::string& out);

// A Responses request body -> a Chat Completions request body. `previous_items`: the stored
// conversation of previous_response_id (items as in ResponsesRequest::items, the previous
// output included), or null.
ResponsesRequest responses_to_chat(const nlohmann::ordered_json& body,
                                   const nlohmann::ordered_json* previous_items = nullptr);

// What identifies a response object.
struct ResponseInfo {
  std::string id;       // "resp_..."
  int64_t created_at = 0;  // unix seconds
  nlohmann::ordered_json echo;  // ResponsesRequest::echo
};
ResponseInfo new_response_info(nlohmann::ordered_json echo);

// The output items of a chat result (a message item with one output_text part when there is
// text or no call; one function_call item per call). Item ids are generated.
nlohmann::ordered_json output_items(const ChatResult& r);

// The response object. `status`: "in_progress", "completed", "incomplete", "failed",
// "cancelled". `r`: null for an in_progress object (no output, no usage).
nlohmann::ordered_json response_object(const ResponseInfo& info, const std::string& status,
                                       const nlohmann::ordered_json& output, const ChatResult* r);

// A finished chat result -> the response object (completed, or incomplete at the length limit).
nlohmann::ordered_json chat_to_response(const ChatResult& r, const ResponseInfo& info);

class ResponsesStream final : public StreamTranslator {
 public:
  explicit ResponsesStream(ResponseInfo info);
  std::string on_chunk(const nlohmann::ordered_json& chunk) override;
  std::string finish() override;
  std::string fail(const ShapeError& e) override;
  const ChatResult& result() const override { return acc_; }
  // After finish(): the final response object (what a store keeps); null before.
  const nlohmann::ordered_json& final_response() const { return final_; }

 private:
  std::string event(const std::string& type, nlohmann::ordered_json data);
  std::string start();
  std::string close_item();

  ResponseInfo info_;
  ChatResult acc_;
  int64_t seq_ = 0;
  bool started_ = false;
  bool finished_ = false;
  nlohmann::ordered_json output_ = nlohmann::ordered_json::array();  // finished items
  // The open item: -1 none; its kind (message or function call) and id.
  int open_ = -1;
  bool open_is_text_ = false;
  size_t open_call_ = 0;
  std::string open_id_;
  std::string open_text_;
  nlohmann::ordered_json final_;
};

}  // namespace cadenza::apishape
