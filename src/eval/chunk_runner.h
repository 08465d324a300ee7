// The perplexity protocol's forward passes: a token sequence cut into chunks of `ctx` tokens,
// each chunk's first token replaced by BOS, each chunk run as its own sequence from position 0,
// several chunks per Model::forward step, and the logits of the scored rows (first .. ctx-2,
// each predicting the chunk's next token) handed to a callback chunk by chunk, in order.
//
// Used by `cadenza perplexity` (docs/perplexity.md); the loss is the caller's business.
// The model must not be used by anyone else while run_chunks runs (Model::forward).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "model/model.h"
#include "tensor/dtype.h"
#include "util/result.h"

namespace cadenza::eval {

struct ChunkOptions {
  int32_t ctx = 128;       // tokens per chunk, >= 2, <= the model's context_length
  int32_t first = 64;      // the first scored row, < ctx - 1
  int32_t n_chunks = 0;    // >= 1, with n_chunks * ctx <= tokens.size()
  // Tokens per forward step: max(1, batch_tokens / ctx) whole chunks per step when
  // batch_tokens >= ctx, else one chunk in steps of batch_tokens tokens. >= 1.
  int32_t batch_tokens = 512;
  int32_t bos_id = 1;      // replaces each chunk's first token, < n_vocab
  DType kv_type = DType::F16;
};

// The rows scored per chunk: ctx - 1 - first.
inline int32_t scored_rows(const ChunkOptions& o) { return o.ctx - 1 - o.first; }

// Called once per chunk, in chunk order: `logits` is [scored_rows][n_vocab], row r the logits
// at chunk position first + r (predicting the chunk's token first + r + 1). An error stops the
// run and is returned.
using ChunkLogits = std::function<Status(int32_t chunk, std::span<const float> logits)>;

// Runs the chunks. Errors: options outside their contract (ctx above the model's context, too
// few tokens, a token id outside the vocabulary), a failed KV allocation or forward step.
Status run_chunks(model::Model& model, std::span<const int32_t> tokens, const ChunkOptions& options,
                  const ChunkLogits& on_chunk);

}  // namespace cadenza::eval
