// OpenAI API request parsing (POST /v1/completions, /v1/chat/completions, /tokenize,
// /detokenize) and the error body shape. Pure functions over JSON: no engine, no I/O. The sampling
// fields are read by the shared reader (request/sampling_json.h); whether a request can run on the
// model is validate_request's (request/validate_request.h), which the router calls.
//
// Unknown fields are ignored (clients send extras). Features the engine lacks (echo, suffix,
// best_of > 1) are accepted only at their neutral values; anything
// else is a 400 "... is not supported yet" instead of being silently ignored.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "request/sampling_json.h"
#include "request/sampling_params.h"
#include "request/validate_request.h"

namespace cadenza::server {

// An error answer: HTTP status and OpenAI's {"error": {message, type, param, code}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
};

// {"error": {...}} for `e`.
nlohmann::json error_body(const ApiError& e);
ApiError bad_request(std::string message, std::string param = {});
// Any other error: its HTTP status, OpenAI `type` and `code` (no param).
ApiError api_error(int status, std::string message, std::string type, std::string code = {});

enum class Endpoint { kCompletions, kChat };

// SamplingParams with OpenAI's defaults where they differ from the engine's.
SamplingParams openai_sampling_defaults();

// A ParamError (request/validate_request.h, request/sampling_json.h) as a 400 naming its param.
ApiError bad_request(const ParamError& e);

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;  // as sent; empty when absent
  // Completions: the prompt as text, or as token ids (prompt_is_tokens).
  std::string prompt_text;
  std::vector<int32_t> prompt_tokens;
  bool prompt_is_tokens = false;
  // Chat: messages normalised to {role, content: string, ...other fields kept}; tools as given.
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;  // null when absent
  // Chat: the URLs of the messages' image_url parts, in order; each one's place in `messages` is
  // a kImageMarker in the content.
  std::vector<std::string> image_urls;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int32_t n = 1;
  // vLLM's `priority`: lower is scheduled first and preempted last (0 when absent). Accepted
  // only by a server started with --scheduling-policy priority (routes.cpp).
  int32_t priority = 0;
  // The sampling fields (request/sampling_json.h lists them), preset to OpenAI's defaults
  // (temperature 1, top_p 1, top_k off, min_p 0); `given` says whether max_tokens and seed were
  // sent (the router defaults them). Not validated against the model: validate_request does that.
  SamplingParams sampling = openai_sampling_defaults();
  SamplingFieldsGiven given;
  // -1: no logprobs. Otherwise how many top alternatives per token (completions: `logprobs`;
  // chat: `top_logprobs` when `logprobs` is true).
  int32_t logprobs = -1;
};

struct ParsedCompletion {
  std::optional<ApiError> error;
  CompletionRequest request;
};

// Parses and validates a request body already decoded as JSON.
ParsedCompletion parse_completion_request(const nlohmann::json& body, Endpoint endpoint);

// Decodes `text` as a JSON object; a 400 ApiError otherwise, also when arrays and objects nest
// deeper than kMaxJsonDepth (deep documents would exhaust the stack in recursive JSON code).
inline constexpr int kMaxJsonDepth = 128;
std::optional<ApiError> parse_json_object(const std::string& text, nlohmann::json& out);

// Whether `text` (JSON or not) opens more than `max_depth` arrays/objects at once, strings
// excepted. Linear, no allocation.
bool json_nesting_exceeds(std::string_view text, int max_depth);

// /tokenize: {"prompt": "text"} or {"messages": [...]}, optional add_special (default true for a
// prompt, false for messages), add_generation_prompt (default true).
struct TokenizeRequest {
  bool has_messages = false;
  std::string prompt;
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;
  std::optional<bool> add_special;
  bool add_generation_prompt = true;
};
struct ParsedTokenize {
  std::optional<ApiError> error;
  TokenizeRequest request;
};
ParsedTokenize parse_tokenize_request(const nlohmann::json& body);

// /detokenize: {"tokens": [ids]}.
struct ParsedDetokenize {
  std::optional<ApiError> error;
  std::vector<int32_t> tokens;
};
ParsedDetokenize parse_detokenize_request(const nlohmann::json& body);

// Where an image goes in a normalised message's content (and so in the rendered prompt). Text
// that contains it is refused when images are collected (it would be taken for an image).
inline constexpr std::string_view kImageMarker = "<|cadenza:image|>";

// Chat messages: an array of {role: string, content: string | null | [{type:"text", text}]}
// normalised to string contents. Errors name the message index.
// `image_urls` non-null: image_url parts ({"type": "image_url", "image_url": {"url": ...}}) are
// accepted, their URLs appended to it and a kImageMarker put in their place; null: they are a
// 400 "not supported".
std::optional<ApiError> normalize_messages(const nlohmann::json& in, nlohmann::ordered_json& out,
                                           std::vector<std::string>* image_urls = nullptr);

}  // namespace cadenza::server
