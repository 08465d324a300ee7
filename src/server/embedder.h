// Embedder: the model side of /v1/embeddings and /v1/rerank, over either kind of model:
//  - DecoderEmbedder: a decoder (any family Model runs): prefill only, no sampling, over its own
//    single-sequence Session (model/session.h), never the engine's KV cache; vectors pooled from
//    the final normalized hidden states; rerank scores Qwen3-Reranker style from the yes/no
//    logits.
//  - EncoderEmbedder: a bert encoder (model/encoder.h): inputs batched into one forward pass, no
//    KV cache; rerank scores from a cross-encoder's classification head.
//
//   auto e = make_decoder_embedder(model, tokenizer, {.pooling = Pooling::kLast, .max_tokens = 4096});
//   auto v = e->embed({tokens_a, tokens_b});        // pooled, L2-normalized, [n_embd] each
//   auto in = e->rerank_input(tok, "", query, doc);  // I/O thread: tokens (+types) of a pair
//   auto s = e->score({in});                         // engine thread: relevance in [0, 1]
//
// Why a decoder gets its own Session: an embedding is a one-off prefill whose KV is thrown away;
// taking blocks from the engine's cache would compete with generation for them and pollute the
// prefix cache. Its KV (max_tokens positions, created at the first request) is extra memory.
// Thread-safety: the const accessors and rerank_input() from any thread; embed() and score()
// drive the model, so they run where the engine's steps run (EngineBridge::run_task): one forward
// pass at a time per model. The model outlives the embedder.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/encoder.h"
#include "model/model.h"
#include "model/pooling.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace cadenza::server {

struct EmbedderOptions {
  model::Pooling pooling = model::Pooling::kLast;  // kMean, kCls, kLast; kRank: scores only
  int32_t max_tokens = 4096;                        // the longest input
  // Decoder: tokens per forward pass. The hidden rows of a pass use the model's logits scratch
  // ([rows][n_vocab] floats), so this also bounds that memory. Encoder: tokens per batch (more
  // inputs are split into several forward passes; one longer input is a pass of its own).
  int32_t max_batch_tokens = 128;
};

// One (query, document) pair as the model reads it.
struct RerankInput {
  std::vector<int32_t> tokens;
  std::vector<int32_t> types;  // token types (segment ids) for an encoder; empty: all 0
};

class Embedder {
 public:
  virtual ~Embedder() = default;
  const EmbedderOptions& options() const { return options_; }
  virtual int64_t n_embd() const = 0;
  virtual int32_t n_vocab() const = 0;

  // Why this model cannot rerank with `tok` (a 400's message), or nullopt when it can.
  virtual std::optional<std::string> rerank_unsupported(const Tokenizer& tok) const = 0;
  // The tokens of one pair (empty instruction: the default one; decoders only).
  virtual RerankInput rerank_input(const Tokenizer& tok, const std::string& instruction,
                                   const std::string& query, const std::string& document) const = 0;

  // The pooled, L2-normalized vector of each input (1..max_tokens valid ids each, which the
  // caller checked): [inputs][n_embd]. Errors: the model's (out of memory).
  virtual Result<std::vector<std::vector<float>>> embed(
      const std::vector<std::vector<int32_t>>& inputs) = 0;
  // The relevance of each pair, in [0, 1] (docs/server.md: how each kind scores).
  virtual Result<std::vector<double>> score(const std::vector<RerankInput>& inputs) = 0;

 protected:
  explicit Embedder(EmbedderOptions options) : options_(options) {}
  EmbedderOptions options_;
};

// A decoder. Rerank: sigmoid(logit("yes") - logit("no")) at the last token of the
// Qwen3-Reranker prompt (reranker_prompt, embeddings_routes.h), the ids looked up in `tokenizer`
// (only used during the call).
std::unique_ptr<Embedder> make_decoder_embedder(model::Model& model, const Tokenizer& tokenizer,
                                                EmbedderOptions options);
// The embedder of a decoder that serves /v1/embeddings: the pooling `pooling_option` names
// (--pooling: mean, cls, last, rank, none), else the GGUF's pooling_type. Null (no error) when that
// is none or the model is split across processes (logged); errors: an unknown --pooling name, a bad
// pooling_type in the file.
Result<std::unique_ptr<Embedder>> decoder_embedder_for(model::Model& model, const Tokenizer& tokenizer,
                                                       const std::string& pooling_option,
                                                       int32_t max_tokens);
// A bert encoder (options.pooling is ignored: the encoder's own). Rerank (pooling rank):
// sigmoid of class 0 of the classification head over "[CLS] query [SEP] document [SEP]", the
// query's tokens of type 0 and the document's of type 1.
std::unique_ptr<Embedder> make_encoder_embedder(model::Encoder& encoder, EmbedderOptions options);

}  // namespace cadenza::server
