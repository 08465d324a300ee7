// The two ends of a decoder: the token embedding and the output head.
//
//   x      = token_embd[tokens] (* config.embedding_scale)      [n][d]
//            rows named by Batch::embd_rows then replaced by the given embeddings
//   logits = (rms_norm(x[logit rows]) * output_norm) Woutput    [n_logits][V]
//            (* config.logit_scale; soft-capped when config.final_logit_softcap > 0)
//            (tied output, no output.weight: Woutput = token_embd)
//
// Shapes: n = tokens of the step, d = n_embd, V = n_vocab.
// Tensors: `token_embd.weight` [V][d], `output_norm.weight` [d], `output.weight` [V][d] (optional).
// Split models (config.shard): only the first pipeline stage holds the embedding and only the
// last the head; under tensor parallelism the head is vocabulary-parallel (this rank's rows of
// the output matrix, logits [n_logits][V/tp]), the embedding whole (a lookup reads only the
// step's rows of the mapped file).
// Not thread-safe (OutputHead's scratch).
#pragma once

#include <memory>

#include "kernels/backend.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/scratch.h"
#include "model/weight_loader.h"

namespace cadenza::model::blocks {

class TokenEmbedding {
 public:
  // `config` must outlive the block.
  explicit TokenEmbedding(const ModelConfig& config) : c_(config) {}

  Status load(WeightLoader& loader);
  // x: [n][d], the embeddings of the step's tokens.
  void forward(const ForwardContext& ctx, kernels::Matrix x) const;
  const kernels::Weight& table() const { return *token_embd_; }

 private:
  const ModelConfig& c_;
  std::unique_ptr<kernels::Weight> token_embd_;
};

class OutputHead {
 public:
  // `config` must outlive the block.
  explicit OutputHead(const ModelConfig& config) : c_(config) {}

  Status load(WeightLoader& loader);
  Status reserve(kernels::Backend& backend, const StepCapacity& capacity);
  // x: [n][d], the final residual stream; writes ctx.logits. `embedding` supplies the output
  // matrix when it is tied. With ctx.hidden_only, ctx.logits is [n_logits][d] and receives the
  // normalized rows (rms_norm(x[logit rows]) * output_norm) without the output matrix.
  void forward(const ForwardContext& ctx, const TokenEmbedding& embedding, kernels::Matrix x);

 private:
  const ModelConfig& c_;
  std::unique_ptr<kernels::Weight> output_norm_;
  std::unique_ptr<kernels::Weight> output_;  // null when tied to the embedding held here
  ScratchMatrix hidden_;                     // [n_logits][d]
};

// The two ends of a pipeline stage (config.shard): the first stage embeds the step's tokens, a
// later one receives the previous stage's hidden state; the last stage computes the logits, an
// earlier one sends its hidden state on. In one process: embedding and head.
void stage_input(const ForwardContext& ctx, const ModelConfig& config,
                 const TokenEmbedding& embedding, kernels::Matrix x);
void stage_output(const ForwardContext& ctx, const ModelConfig& config, OutputHead& head,
                  const TokenEmbedding& embedding, kernels::Matrix x);

}  // namespace cadenza::model::blocks
