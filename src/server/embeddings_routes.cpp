#include "server/embeddings_routes.h"

#include <algorithm>
#include <future>
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

// Runs `work` on the engine thread and waits for it. `work` returns an error text or "".
// Maps the bridge's refusals to 429 / 503 and a failure of `work` to 500.
std::optional<ApiError> run_on_engine(const ModelContext& ctx,
                                      const std::function<std::string()>& work) {
  // nullopt: not run (shutdown, failed engine). Shared with the task: this thread may return (and
  // would destroy a promise on its stack) while the engine thread is still inside set_value.
  auto done = std::make_shared<std::promise<std::optional<std::string>>>();
  auto answer = done->get_future();
  const SubmitStatus st = ctx.bridge->run_task([done, &work](bool run) {
    // `work` and what it captures are used only before set_value, while this thread waits.
    done->set_value(run ? std::optional<std::string>(work()) : std::nullopt);
  });
  if (st == SubmitStatus::kQueueFull)
    return api_error(429, "the server's request queue is full; retry later", "rate_limit_error",
                     "queue_full");
  if (st == SubmitStatus::kNotAccepting)
    return api_error(503, "the server is draining", "service_unavailable", "not_ready");
  // The bridge calls every accepted task exactly once (run or refused), so this returns.
  const std::optional<std::string> result = answer.get();
  if (!result)
    return api_error(503, "the server is stopping", "service_unavailable", "not_ready");
  if (!result->empty()) return api_error(500, *result, "server_error", "internal_error");
  return std::nullopt;
}

}  // namespace

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

HttpReply embeddings_route(const ModelContext& ctx, const json& body) {
  auto parsed = parse_embeddings_request(body);
  if (parsed.error) return error_reply(*parsed.error);
  const EmbeddingsRequest& req = parsed.request;
  if (auto e = check_model_name(ctx, req.model)) return error_reply(*e);
  const Pooling pooling = ctx.embedder ? ctx.embedder->options().pooling : Pooling::kNone;
  if (pooling != Pooling::kMean && pooling != Pooling::kCls && pooling != Pooling::kLast) {
    return error_reply(bad_request(
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
    return error_reply(bad_request(fmt::format("'dimensions' {} is more than the model's {}",
                                               *req.dimensions, n_embd), "dimensions"));

  std::vector<std::vector<int32_t>> inputs;
  inputs.reserve(req.inputs.size());
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const EmbeddingInput& in = req.inputs[i];
    inputs.push_back(in.is_tokens ? in.tokens : ctx.tokenizer->encode(in.text, true, false));
    if (auto e = check_tokens(ctx, inputs.back(), i, "input")) return error_reply(*e);
    prompt_tokens += static_cast<int64_t>(inputs.back().size());
  }

  std::vector<std::vector<float>> vectors;
  Embedder& embedder = *ctx.embedder;
  auto failed = run_on_engine(ctx, [&]() -> std::string {
    auto v = embedder.embed(inputs);
    if (!v) return v.error();
    vectors = std::move(*v);
    return {};
  });
  if (failed) return error_reply(*failed);
  if (req.dimensions && *req.dimensions < n_embd) {
    // Matryoshka truncation: the first `dimensions` components, renormalized to length 1.
    for (auto& v : vectors) {
      v.resize(static_cast<size_t>(*req.dimensions));
      model::l2_normalize(v);
    }
  }
  return json_reply(200, embeddings_response(vectors, req.base64, ctx.model_name, prompt_tokens));
}

HttpReply rerank_route(const ModelContext& ctx, const json& body) {
  auto parsed = parse_rerank_request(body);
  if (parsed.error) return error_reply(*parsed.error);
  const RerankRequest& req = parsed.request;
  if (auto e = check_model_name(ctx, req.model)) return error_reply(*e);
  if (!ctx.embedder || ctx.embedder->options().pooling != Pooling::kRank) {
    return error_reply(bad_request(
        fmt::format("the model '{}' is not a reranker: its GGUF's pooling type is not 'rank' "
                    "(start the server with --pooling rank for a Qwen3-Reranker-style model)",
                    ctx.model_name),
        "model"));
  }
  if (auto why = ctx.embedder->rerank_unsupported(*ctx.tokenizer))
    return error_reply(bad_request(
        fmt::format("the model '{}' cannot rerank: {}", ctx.model_name, *why), "model"));

  std::vector<RerankInput> pairs;
  pairs.reserve(req.documents.size());
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < req.documents.size(); ++i) {
    pairs.push_back(
        ctx.embedder->rerank_input(*ctx.tokenizer, req.instruction, req.query, req.documents[i]));
    if (auto e = check_tokens(ctx, pairs.back().tokens, i, "documents")) return error_reply(*e);
    prompt_tokens += static_cast<int64_t>(pairs.back().tokens.size());
  }
  std::vector<double> scores;
  Embedder& embedder = *ctx.embedder;
  auto failed = run_on_engine(ctx, [&]() -> std::string {
    auto s = embedder.score(pairs);
    if (!s) return s.error();
    scores = std::move(*s);
    return {};
  });
  if (failed) return error_reply(*failed);
  return json_reply(200, rerank_response(req, scores, ctx.model_name, prompt_tokens));
}

}  // namespace cadenza::server
