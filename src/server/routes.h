// Router: maps one HTTP request to its answer. Plain replies (health, models, tokenize, errors...)
// are built here; generation requests come back as a GenerationPlan that the connection submits
// to the engine and streams from.
//
// Order of checks: route (404), method (405), API key (401, except /health, /ready, /metrics),
// readiness and drain (503), body (400), model name (404), prompt length (400).
// Router mode (ctx.pool set): the body's `model` names the model (400 when missing, 404
// model_not_found when not in the catalog); a model not loaded yet comes back as `await_model`.
// Thread-safety: handle() is const and may run on every I/O thread at once.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/generation.h"
#include "server/model_pool.h"
#include "server/openai_protocol.h"
#include "server/server_context.h"

namespace cadenza::server {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;

// Beast's string_view (boost::string_view in Boost 1.74) as std::string_view.
inline std::string_view to_sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

struct HttpReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

HttpReply json_reply(int status, const nlohmann::json& body);
HttpReply ordered_json_reply(int status, const nlohmann::ordered_json& body);
HttpReply error_reply(const ApiError& e);
// An error reply in `api`'s shape (Anthropic's for /v1/messages; OpenAI's otherwise).
HttpReply shaped_error_reply(apishape::Api api, const ApiError& e);
// The API a path speaks: /v1/messages* Anthropic Messages, /v1/responses* Responses, else chat.
apishape::Api api_of_path(std::string_view path);

// Work a generation needs before it can be submitted (its images fetched and encoded, off the
// I/O thread): called once with `done`, which must then be called exactly once, from any thread,
// with an error (the request's answer) or the images of inputs[0].
struct PreparedInputs {
  std::optional<ApiError> error;
  std::vector<ImageInput> images;
};
using PrepareInputs = std::function<void(std::function<void(PreparedInputs)> done)>;

struct GenerationPlan {
  std::unique_ptr<GenerationJob> job;
  std::vector<GenInput> inputs;
  PrepareInputs prepare;  // empty: submit at once
  EngineBridge* bridge = nullptr;  // where to submit (the model's)
  ModelHandle model;  // router mode: keeps the model loaded until the generation's final event
};

// A reply computed later, off the I/O thread: the connection calls it once with `done`, which
// must then be called exactly once, from any thread, with the reply.
using ReplyCallback = std::function<void(HttpReply)>;
using DeferredReply = std::function<void(ReplyCallback done)>;

struct RouteResult {
  std::string route;  // the metrics label: a fixed route name, or "other"
  std::optional<HttpReply> reply;
  std::optional<GenerationPlan> generation;
  // Router mode: the request's model is not loaded. The connection acquires it from the pool
  // (ModelPool::acquire, which loads it on the loader thread) and calls handle() again with it.
  std::string await_model;
  // Embeddings and rerank: the reply comes from the model's engine thread (the connection waits
  // without a thread). Holds what it needs (router mode: the model).
  DeferredReply deferred;
};

// Images in chat (docs/vision.md): a 400 when `urls` is not empty and the model takes no images
// or VisionService::check refuses them.
std::optional<ApiError> check_images(const ModelContext& m, const std::vector<std::string>& urls);
// The token ids of rendered chat `text` holding `n_images` kImageMarkers: the text pieces
// tokenized (the first with the chat BOS rule), each marker replaced by the encoder's placeholder
// tokens, whose first positions go to `positions`. A 400 when the template did not keep exactly
// n_images markers. n_images 0: ChatRenderer::encode.
std::optional<ApiError> chat_prompt(const ModelContext& m, const std::string& text, size_t n_images,
                                    std::vector<int32_t>& prompt, std::vector<int32_t>& positions);

class Router {
 public:
  explicit Router(ServerContext& ctx) : ctx_(ctx) {}
  // `model`: router mode, the model acquired for this request after an `await_model` answer.
  RouteResult handle(const HttpRequest& req, const ModelHandle& model = nullptr) const;

 private:
  HttpReply models() const;
  HttpReply tokenize(const ModelContext& m, const nlohmann::json& body) const;
  HttpReply detokenize(const ModelContext& m, const nlohmann::json& body) const;
  // `raw_body`: the body's text (parsed again, ordered, for schemas).
  RouteResult generation(const ModelContext& m, const nlohmann::json& body,
                         const std::string& raw_body, Endpoint endpoint, RouteResult r) const;
  RouteResult route(const HttpRequest& req, const ModelHandle& model) const;
  // routes_apishape.cpp: /v1/messages, /v1/messages/count_tokens, /v1/responses and
  // /v1/responses/{id}[/cancel] (src/apishape translates to and from the chat path).
  // Router mode: the ModelContext of the model `name` (null: missing), acquired into `held`;
  // null with r.reply (400 / 404) or r.await_model set when it cannot be used yet. Otherwise the
  // one model's context.
  const ModelContext* model_for(const std::string* name, ModelHandle& held, RouteResult& r) const;
  // routes_apishape.cpp: /v1/messages, /v1/messages/count_tokens, /v1/responses and
  // /v1/responses/{id}[/cancel] (src/apishape translates to and from the chat path). In router
  // mode the body's `model` picks the model, as for chat; stored responses are the server's.
  RouteResult apishape_route(std::string_view target, const HttpRequest& req,
                             const ModelHandle& model, RouteResult r) const;
  RouteResult messages(const ModelContext& m, ModelHandle held, const nlohmann::ordered_json& body,
                       RouteResult r) const;
  HttpReply count_tokens(const ModelContext& m, const nlohmann::ordered_json& body) const;
  RouteResult responses(const ModelContext& m, ModelHandle held, const nlohmann::ordered_json& body,
                        RouteResult r) const;
  HttpReply stored_response(std::string_view id, bool cancel, const HttpRequest& req) const;
  // A converted Chat Completions body through generation() on model `m` (kept by `held`).
  RouteResult chat_generation(const ModelContext& m, ModelHandle held,
                              const nlohmann::ordered_json& chat, RouteResult r) const;

  ServerContext& ctx_;
};

}  // namespace cadenza::server
