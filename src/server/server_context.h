// ServerContext: what every connection needs to answer requests, shared by the I/O threads.
// ModelContext: the half that belongs to one model (its name, tokenizer, engine bridge...).
// One model (`serve -m FILE`): the ServerContext's own ModelContext base is that model.
// Router mode (`serve --models-dir DIR`, several -m): `pool` is set, the base is empty (null
// pointers), and each request resolves its model's ModelContext through the pool
// (server/model_pool.h).
// Ownership: borrows everything (the Server owns it all and outlives its connections; a pooled
// model's ModelContext lives as long as a ModelHandle to it is held).
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

class ModelPool;
class Embedder;
class VisionService;

struct ModelContext {
  std::string model_name;
  int32_t max_model_len = 0;
  const Tokenizer* tokenizer = nullptr;
  const ChatRenderer* chat = nullptr;
  EngineBridge* bridge = nullptr;
  // Structured output (docs/structured-output.md): compiled grammars for this vocabulary, the
  // model family's tool-call syntax (--tool-call-parser, else detected from the chat template,
  // else Hermes) and where its reasoning goes (--reasoning-parser, else detected).
  GrammarCache* grammars = nullptr;
  toolcall::ToolCallFormat tool_format = toolcall::ToolCallFormat::kHermes;
  toolcall::ReasoningFormat reasoning = toolcall::ReasoningFormat::kNone;
  // /v1/embeddings and /v1/rerank (embeddings_routes.h): the model side, driven on the engine
  // thread only (EngineBridge::run_task); its options() may be read anywhere. Null: the model has
  // no pooling type (those routes answer 400).
  Embedder* embedder = nullptr;
  // False for an encoder model (bert): no engine; completions and chat answer 400.
  bool generates = true;
  // serve --mmproj: images in chat messages (server/vision_service.h). Null: a 400 for images.
  VisionService* vision = nullptr;
};

struct ServerContext : ModelContext {
  int64_t created = 0;        // unix time the server started (GET /v1/models)
  size_t max_body_bytes = 0;
  ModelPool* pool = nullptr;  // router mode only (then the ModelContext base is empty)
  Metrics* metrics = nullptr;
  // Finished Responses API responses (--responses-store N); null when off (N = 0).
  ResponseStore* responses = nullptr;
  ApiKeys keys;
  // --scheduling-policy priority: requests may carry `priority` (else a non-zero one is a 400).
  bool priority_scheduling = false;
  // The web console at / and /webui/* (ServerConfig::webui).
  bool webui = true;
  // --request-timeout: a generation still running this many seconds after its request arrived
  // is aborted (its KV freed) and answered 504; 0: no limit. A request's X-Request-Timeout
  // header may ask for less (never more).
  double request_timeout_s = 0;
  std::atomic<bool> draining{false};
  // Generation responses accepted and not yet completely written (drain waits for them).
  std::atomic<int64_t> open_generations{0};
};

}  // namespace cadenza::server
