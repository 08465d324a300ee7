// The gateway's side of src/apishape: /v1/messages and /v1/responses from clients. To a cadenza
// upstream they go as they are (the replica speaks them); to an upstream configured `api: chat`
// (VersionConfig::api) the request is converted to /v1/chat/completions and the answer, a JSON
// body or an SSE stream, is converted back with the same translators `cadenza serve` uses.
// Errors are written in the client's API's shape either way.
// Ownership: one ShapedCall per proxied request, plain state. Thread-safety: none (the request's
// coroutine only).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "apishape/chat_result.h"
#include "apishape/error.h"
#include "apishape/responses.h"
#include "apishape/sse_reader.h"
#include "gateway/config.h"
#include "gateway/responses.h"

namespace cadenza::gateway {

// The API of a gateway route name ("chat", "completions", "messages", "count_tokens",
// "responses").
apishape::Api api_of_route(const std::string& route);

// `r` (an error reply in OpenAI's or Anthropic's shape, from the gateway or an upstream) in
// `api`'s shape; other replies unchanged.
Reply shaped(apishape::Api api, Reply r);

class ShapedCall {
 public:
  // Prepares the upstream request of `route` for `version`: `target` and `body` (the client's
  // ordered body; `model` already set to the upstream's name) are rewritten when converting.
  // A Reply (400 in the client's shape) when the request cannot go to this upstream.
  std::optional<Reply> prepare(const std::string& route, const VersionConfig& version,
                               std::string& target, nlohmann::ordered_json& body);
  bool converting() const { return convert_; }
  apishape::Api api() const { return api_; }
  // A complete upstream answer -> the client's (converted when converting; errors reshaped).
  Reply finish_reply(Reply upstream);
  // Upstream SSE bytes -> the client's SSE bytes (the same bytes when not converting).
  std::string stream_piece(std::string_view bytes);
  // The upstream stream ended cleanly: the closing events (empty when not converting).
  std::string stream_end();
  // The upstream stream broke after it started: the client's API's error event(s).
  std::string stream_broken(const std::string& message);

 private:
  apishape::Api api_ = apishape::Api::kChat;
  bool convert_ = false;
  bool stream_ = false;
  apishape::ResponseInfo info_;  // Responses: the id, created_at and echoed settings
  std::unique_ptr<apishape::StreamTranslator> translator_;
  apishape::SseReader reader_;
  bool done_ = false;  // the translator has closed (saw [DONE], ended or failed)
};

}  // namespace cadenza::gateway
