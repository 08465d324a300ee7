// The handlers of POST /v1/embeddings and POST /v1/rerank. routes.cpp dispatches to them after
// its route, method, API key, readiness and JSON checks; these check the body (400 naming the
// param), the model name (404), whether the model can embed or rerank (400), tokenize, and run
// the model work on the engine thread (EngineBridge::run_task: one in-flight request each, so
// the queue limit (429) and the drain apply), then answer.
//
// The checks run on the calling I/O thread and answer at once (r.reply); the model work comes back
// as r.deferred, whose reply the engine thread makes (an embedding is a prefill; the engine runs
// it between two steps), so no I/O thread waits for it. `held` (router mode) keeps the model
// loaded until then. Rules and examples: docs/server.md, "Embeddings and rerank".
// Thread-safety: like Router::handle, from any I/O thread.
#pragma once

#include <nlohmann/json.hpp>

#include "server/routes.h"
#include "server/server_context.h"

namespace cadenza::server {

// The reply of `work`, made on the model's engine thread (EngineBridge::run_task): for routes
// that need the model or its engine. `held` keeps a router's model (and so `ctx`'s parts) loaded
// until then. A queue that is full answers 429, a draining or stopping server 503, a failure of
// `work` 500.
DeferredReply on_engine(const ModelContext& ctx, ModelHandle held,
                        std::function<Result<HttpReply>()> work);

void embeddings_route(const ModelContext& ctx, ModelHandle held, const nlohmann::json& body,
                      RouteResult& r);
void rerank_route(const ModelContext& ctx, ModelHandle held, const nlohmann::json& body,
                  RouteResult& r);

// The Qwen3-Reranker prompt for one (query, document) pair (docs/server.md): a ChatML system turn
// that asks for "yes" or "no", the user turn "<Instruct>: ...\n<Query>: ...\n<Document>: ...",
// and an assistant turn opened with an empty think block. Empty instruction: the default one.
std::string reranker_prompt(const std::string& instruction, const std::string& query,
                            const std::string& document);

}  // namespace cadenza::server
