#include "model/blocks/embedding.h"

namespace cadenza::model::blocks {

using kernels::Matrix;

Status TokenEmbedding::load(WeightLoader& loader) {
  return loader.load({{token_embd_, "token_embd.weight", {c_.n_embd, c_.n_vocab}}});
}

void TokenEmbedding::forward(const ForwardContext& ctx, Matrix x) const {
  ctx.backend.get_rows(*token_embd_, ctx.inputs.tokens, x);  // [n][d]
}

Status OutputHead::load(WeightLoader& loader) {
  return loader.load({
      {output_norm_, "output_norm.weight", {c_.n_embd}},
      {output_, "output.weight", {c_.n_embd, c_.n_vocab}, Load::IfPresent},
  });
}

Status OutputHead::reserve(kernels::Backend& backend, const StepCapacity& capacity) {
  return hidden_.reserve(backend, capacity.max_logit_rows, c_.n_embd);
}

void OutputHead::forward(const ForwardContext& ctx, const TokenEmbedding& embedding, Matrix x) {
  kernels::Backend& be = ctx.backend;
  const Matrix hidden = hidden_.rows(ctx.inputs.n_logits);
  be.gather_rows(x, ctx.inputs.logit_rows, hidden);  // only the rows whose logits are wanted
  be.rms_norm(hidden, *output_norm_, c_.rms_norm_eps, hidden);
  be.matmul(output_ ? *output_ : embedding.table(), hidden, ctx.logits);  // [n_logits][V]
}

}  // namespace cadenza::model::blocks
