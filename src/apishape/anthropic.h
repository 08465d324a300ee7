// Anthropic Messages API (POST /v1/messages) <-> OpenAI Chat Completions.
//
// Request (messages_to_chat): model, max_tokens (required), messages (user/assistant; content a
// string or blocks: text, tool_use, tool_result), system (string or text blocks), stop_sequences,
// temperature, top_p, top_k, stream, tools (custom tools: name, description, input_schema),
// tool_choice (auto, any, tool, none; disable_parallel_tool_use). Tolerated and ignored: metadata,
// service_tier, cache_control on blocks and tools, thinking {"type":"disabled"}. Any other field,
// block type or tool type is a 400 naming it.
// Response (chat_to_message): {"id":"msg_..","type":"message","role":"assistant","model",
// "content":[text, tool_use...],"stop_reason":"end_turn"|"max_tokens"|"stop_sequence"|"tool_use",
// "stop_sequence","usage":{"input_tokens","output_tokens"}}.
// Stream (MessagesStream): message_start, ping, content_block_start / content_block_delta
// (text_delta, input_json_delta) / content_block_stop per block, message_delta (stop_reason,
// usage), message_stop; each as "event: NAME\ndata: JSON\n\n". A failure mid-stream is an
// `error` event.
// Thread-safety: pure functions; a MessagesStream is plain state.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "apishape/chat_result.h"
#include "apishape/error.h"

namespace cadenza::apishape {

struct ChatRequest {
  std::optional<ShapeError> error;
  nlohmann::ordered_json chat;  // a Chat Completions body (stream_options.include_usage when streaming)
  bool stream = false;
};

// A Messages request body -> a Chat Completions request body.
ChatRequest messages_to_chat(const nlohmann::ordered_json& body);

// A Messages request body -> the Chat Completions body that counts its tokens
// (/v1/messages/count_tokens takes the same fields without max_tokens).
ChatRequest count_tokens_to_chat(const nlohmann::ordered_json& body);

// A chat result -> a Messages response. `id`: the message id ("msg_..."), random when empty.
nlohmann::ordered_json chat_to_message(const ChatResult& r, const std::string& id = {});

// Anthropic's stop_reason for a chat result (and the stop_sequence, null when none).
std::string anthropic_stop_reason(const ChatResult& r);

class MessagesStream final : public StreamTranslator {
 public:
  // `input_tokens`: the prompt's size when known before the first chunk (the server knows it;
  // a gateway does not: 0, and the final message_delta's usage carries it).
  explicit MessagesStream(int64_t input_tokens = 0, std::string id = {});
  std::string on_chunk(const nlohmann::ordered_json& chunk) override;
  std::string finish() override;
  std::string fail(const ShapeError& e) override;
  const ChatResult& result() const override { return acc_; }

 private:
  std::string start();
  std::string close_block();

  ChatResult acc_;
  std::string id_;
  int64_t input_tokens_;
  bool started_ = false;
  bool finished_ = false;
  int block_ = -1;         // the open content block's index; -1: none open
  int next_block_ = 0;
  bool text_open_ = false;  // the open block is text (else a tool_use)
  size_t tool_open_ = 0;    // the open tool_use block's call index
};

// "event: NAME\ndata: JSON\n\n".
std::string named_event(const std::string& name, const nlohmann::ordered_json& data);

}  // namespace cadenza::apishape
