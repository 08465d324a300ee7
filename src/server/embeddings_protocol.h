// Request parsing and response bodies of POST /v1/embeddings (OpenAI's shape) and POST /v1/rerank
// (the Jina / Cohere shape). Pure JSON <-> structs; no model, no tokenizer (the route does that:
// embeddings_routes.h). Thread-safe (pure functions). docs/server.md documents the fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"

namespace cadenza::server {

// Bounds on a request's size, checked while parsing (so a huge body is refused before any
// tokenization or model work).
inline constexpr size_t kMaxEmbeddingInputs = 2048;  // inputs of one /v1/embeddings request
inline constexpr size_t kMaxRerankDocuments = 1024;  // documents of one /v1/rerank request

// One input: either text (tokenized by the route) or token ids as given.
struct EmbeddingInput {
  bool is_tokens = false;
  std::string text;
  std::vector<int32_t> tokens;
};

struct EmbeddingsRequest {
  std::string model;  // empty: the served model
  std::vector<EmbeddingInput> inputs;  // >= 1, in the order of `input`
  bool base64 = false;                 // encoding_format "base64" (default "float")
  std::optional<int64_t> dimensions;   // >= 1 when given (the route checks it against n_embd)
};

struct ParsedEmbeddings {
  std::optional<ApiError> error;
  EmbeddingsRequest request;
};

// `input`: a string, an array of strings, an array of token ids, or an array of arrays of token
// ids (each non-empty; ids >= 0 and < 2^31; the route checks them against the vocabulary).
// `encoding_format`: "float" or "base64". `dimensions`: a positive integer. `user` is accepted
// and ignored. Anything else wrong is a 400 naming the param.
ParsedEmbeddings parse_embeddings_request(const nlohmann::json& body);

struct RerankRequest {
  std::string model;
  std::string query;
  std::vector<std::string> documents;  // >= 1
  std::optional<int64_t> top_n;        // >= 1 when given: the best top_n results only
  bool return_documents = false;
  std::string instruction;             // the decoder reranker's task line (empty: the default)
};

struct ParsedRerank {
  std::optional<ApiError> error;
  RerankRequest request;
};

// `query`: a non-empty string; `documents`: a non-empty array of strings or of objects with a
// string `text`; `top_n`: a positive integer; `return_documents`: a boolean; `instruction`: a
// string (a Qwen3-Reranker extension). 400 naming the param otherwise.
ParsedRerank parse_rerank_request(const nlohmann::json& body);

// Little-endian float32 bytes of `v`, base64 (RFC 4648, padded): encoding_format "base64".
std::string base64_floats(const std::vector<float>& v);

// {"object":"list","data":[{"object":"embedding","index":i,"embedding":[...] or "..."}],
//  "model":..., "usage":{"prompt_tokens":n,"total_tokens":n}}
nlohmann::json embeddings_response(const std::vector<std::vector<float>>& vectors, bool base64,
                                   const std::string& model, int64_t prompt_tokens);

// Results sorted by score, highest first (ties: lower index first), cut to top_n:
// {"model":..., "object":"list", "results":[{"index":i,"relevance_score":s,"document":{"text":..}}],
//  "usage":{"prompt_tokens":n,"total_tokens":n}} ("document" only with return_documents).
nlohmann::json rerank_response(const RerankRequest& request, const std::vector<double>& scores,
                               const std::string& model, int64_t prompt_tokens);

}  // namespace cadenza::server
