// The two ends of a decoder: the token embedding and the output head.
//
//   x      = token_embd[tokens]                                 [n][d]
//   logits = (rms_norm(x[logit rows]) * output_norm) Woutput    [n_logits][V]
//            (tied output, no output.weight: Woutput = token_embd)
//
// Shapes: n = tokens of the step, d = n_embd, V = n_vocab.
// Tensors: `token_embd.weight` [V][d], `output_norm.weight` [d], `output.weight` [V][d] (optional).
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
  // matrix when it is tied.
  void forward(const ForwardContext& ctx, const TokenEmbedding& embedding, kernels::Matrix x);

 private:
  const ModelConfig& c_;
  std::unique_ptr<kernels::Weight> output_norm_;
  std::unique_ptr<kernels::Weight> output_;  // null when tied
  ScratchMatrix hidden_;                     // [n_logits][d]
};

}  // namespace cadenza::model::blocks
