// ServerContext: what every connection needs to answer requests, shared by the I/O threads.
// Ownership: borrows everything (the Server owns it all and outlives its connections).
// Thread-safety: the pointed-to objects are thread-safe (see their headers); the flags are atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "server/auth.h"
#include "server/chat_template.h"
#include "server/engine_bridge.h"
#include "server/metrics.h"
#include "server/output_grammar.h"
#include "server/response_store.h"
#include "tokenizer/tokenizer.h"
#include "toolcall/tool_call.h"

namespace cadenza::server {

struct ServerContext {
  std::string model_name;
  int64_t created = 0;        // unix time the server started (GET /v1/models)
  int32_t max_model_len = 0;
  size_t max_body_bytes = 0;
  const Tokenizer* tokenizer = nullptr;
  const ChatRenderer* chat = nullptr;
  EngineBridge* bridge = nullptr;
  // Structured output (docs/structured-output.md): compiled grammars for this vocabulary, the
  // model family's tool-call syntax (--tool-call-parser, else detected from the chat template,
  // else Hermes) and where its reasoning goes (--reasoning-parser, else detected).
  GrammarCache* grammars = nullptr;
  toolcall::ToolCallFormat tool_format = toolcall::ToolCallFormat::kHermes;
  toolcall::ReasoningFormat reasoning = toolcall::ReasoningFormat::kNone;
  Metrics* metrics = nullptr;
  // Finished Responses API responses (--responses-store N); null when off (N = 0).
  ResponseStore* responses = nullptr;
  ApiKeys keys;
  std::atomic<bool> draining{false};
  // Generation responses accepted and not yet completely written (drain waits for them).
  std::atomic<int64_t> open_generations{0};
};

}  // namespace cadenza::server
