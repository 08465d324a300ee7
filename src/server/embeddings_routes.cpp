#include "server/embeddings_routes.h"

#include <algorithm>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "server/embedder.h"
#include "server/embeddings_protocol.h"

namespace cadenza::server {

using nlohmann::json;
using model::Pooling;

namespace {

std::optional<ApiError> check_model_name(const ModelContext& ctx, const std::string& model) {
  if (model.empty() || model == ctx.model_name) return std::nullopt;
  return api_error(404, fmt::format("The model '{}' does not exist", model),
                   "invalid_request_error", "model_not_found");
}

// Tokens of one input: checked against the vocabulary and the longest input the embedder takes.
std::optional<ApiError> check_tokens(const ModelContext& ctx, const std::vector<int32_t>& tokens,
                                     size_t index, const char* param) {
  const int32_t limit = ctx.embedder->options().max_tokens;
  if (tokens.empty())
    return bad_request(fmt::format("input {} has no tokens", index), param);
  if (tokens.size() > static_cast<size_t>(limit))
    return bad_request(fmt::format("input {} has {} tokens, more than the {} this server embeds "
                                   "(the model's context)", index, tokens.size(), limit), param);
  const int32_t n_vocab = std::min(ctx.tokenizer->n_vocab(), ctx.embedder->n_vocab());
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab)
      return bad_request(fmt::format("token id {} of input {} is outside the vocabulary ({} "
                                     "tokens)", t, index, n_vocab), param);
  return std::nullopt;
}

}  // namespace

// The reply of `work`, made on the model's engine thread (EngineBridge::run_task). `held` keeps a
// router's model (and so `ctx`'s parts) loaded until then. A queue that is full answers 429, a
// draining or stopping server 503, a failure of `work` 500.
DeferredReply on_engine(const ModelContext& ctx, ModelHandle held,
                        std::function<Result<HttpReply>()> work) {
  EngineBridge* bridge = ctx.bridge;
  return [bridge, held = std::move(held), work = std::move(work)](ReplyCallback done) {
    auto answer = std::make_shared<ReplyCallback>(std::move(done));
    const SubmitStatus st = bridge->run_task([held, work, answer](bool run) {
      if (!run) {
        (*answer)(error_reply(
            api_error(503, "the server is stopping", "service_unavailable", "not_ready")));
        return;
      }
      Result<HttpReply> reply = work();
      (*answer)(reply ? std::move(*reply)
                      : error_reply(api_error(500, reply.error(), "server_error", "internal_error")));
    });
    // Not queued: the task is never called, so the answer is given here.
    if (st == SubmitStatus::kQueueFull)
      (*answer)(error_reply(api_error(429, "the server's request queue is full; retry later",
                                      "rate_limit_error", "queue_full")));
    else if (st == SubmitStatus::kNotAccepting)
      (*answer)(error_reply(
          api_error(503, "the server is draining", "service_unavailable", "not_ready")));
  };
}

std::string reranker_prompt(const std::string& instruction, const std::string& query,
                            const std::string& document) {
  const std::string& task =
      instruction.empty()
          ? std::string("Given a web search query, retrieve relevant passages that answer the query")
          : instruction;
  return "<|im_start|>system\nJudge whether the Document meets the requirements based on the "
         "Query and the Instruct provided. Note that the answer can only be \"yes\" or \"no\"."
         "<|im_end|>\n<|im_start|>user\n<Instruct>: " + task + "\n<Query>: " + query +
         "\n<Document>: " + document +
         "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
}

void embeddings_route(const ModelContext& ctx, ModelHandle held, const json& body,
                      RouteResult& r) {
  auto fail = [&r](const ApiError& e) { r.reply = error_reply(e); };
  auto parsed = parse_embeddings_request(body);
  if (parsed.error) return fail(*parsed.error);
  const EmbeddingsRequest& req = parsed.request;
  if (auto e = check_model_name(ctx, req.model)) return fail(*e);
  const Pooling pooling = ctx.embedder ? ctx.embedder->options().pooling : Pooling::kNone;
  if (pooling != Pooling::kMean && pooling != Pooling::kCls && pooling != Pooling::kLast) {
    return fail(bad_request(
        pooling == Pooling::kRank
            ? fmt::format("the model '{}' is a reranker (pooling 'rank'): use /v1/rerank",
                          ctx.model_name)
            : fmt::format("the model '{}' cannot embed: its GGUF names no pooling type "
                          "(<arch>.pooling_type); start the server with --pooling mean|cls|last "
                          "to pool its hidden states anyway", ctx.model_name),
        "model"));
  }
  const int64_t n_embd = ctx.embedder->n_embd();
  if (req.dimensions && *req.dimensions > n_embd)
    return fail(bad_request(fmt::format("'dimensions' {} is more than the model's {}",
                                               *req.dimensions, n_embd), "dimensions"));

  std::vector<std::vector<int32_t>> inputs;
  inputs.reserve(req.inputs.size());
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const EmbeddingInput& in = req.inputs[i];
    inputs.push_back(in.is_tokens ? in.tokens : ctx.tokenizer->encode(in.text, true, false));
    if (auto e = check_tokens(ctx, inputs.back(), i, "input")) return fail(*e);
    prompt_tokens += static_cast<int64_t>(inputs.back().size());
  }

  Embedder* embedder = ctx.embedder;
  const std::optional<int64_t> dimensions =
      req.dimensions && *req.dimensions < n_embd ? req.dimensions : std::nullopt;
  r.deferred = on_engine(ctx, std::move(held),
                         [embedder, inputs = std::move(inputs), dimensions, base64 = req.base64,
                          name = ctx.model_name, prompt_tokens]() -> Result<HttpReply> {
    auto vectors = embedder->embed(inputs);
    if (!vectors) return vectors.error_value();
    if (dimensions) {
      // Matryoshka truncation: the first `dimensions` components, renormalized to length 1.
      for (auto& v : *vectors) {
        v.resize(static_cast<size_t>(*dimensions));
        model::l2_normalize(v);
      }
    }
    return json_reply(200, embeddings_response(*vectors, base64, name, prompt_tokens));
  });
}

void rerank_route(const ModelContext& ctx, ModelHandle held, const json& body, RouteResult& r) {
  auto fail = [&r](const ApiError& e) { r.reply = error_reply(e); };
  auto parsed = parse_rerank_request(body);
  if (parsed.error) return fail(*parsed.error);
  RerankRequest& req = parsed.request;
  if (auto e = check_model_name(ctx, req.model)) return fail(*e);
  if (!ctx.embedder || ctx.embedder->options().pooling != Pooling::kRank) {
    return fail(bad_request(
        fmt::format("the model '{}' is not a reranker: its GGUF's pooling type is not 'rank' "
                    "(start the server with --pooling rank for a Qwen3-Reranker-style model)",
                    ctx.model_name),
        "model"));
  }
  if (auto why = ctx.embedder->rerank_unsupported(*ctx.tokenizer))
    return fail(bad_request(
        fmt::format("the model '{}' cannot rerank: {}", ctx.model_name, *why), "model"));

  std::vector<RerankInput> pairs;
  pairs.reserve(req.documents.size());
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < req.documents.size(); ++i) {
    pairs.push_back(
        ctx.embedder->rerank_input(*ctx.tokenizer, req.instruction, req.query, req.documents[i]));
    if (auto e = check_tokens(ctx, pairs.back().tokens, i, "documents")) return fail(*e);
    prompt_tokens += static_cast<int64_t>(pairs.back().tokens.size());
  }
  Embedder* embedder = ctx.embedder;
  r.deferred = on_engine(ctx, std::move(held),
                         [embedder, pairs = std::move(pairs), req = std::move(req),
                          name = ctx.model_name, prompt_tokens]() -> Result<HttpReply> {
    auto scores = embedder->score(pairs);
    if (!scores) return scores.error_value();
    return json_reply(200, rerank_response(req, *scores, name, prompt_tokens));
  });
}

}  // namespace cadenza::server
