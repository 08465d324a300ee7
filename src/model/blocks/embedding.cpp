#include "model/blocks/embedding.h"

namespace cadenza::model::blocks {

using kernels::Matrix;

Status TokenEmbedding::load(WeightLoader& loader) {
  if (!c_.shard.first_stage) return {};  // later pipeline stages receive the hidden state
  return loader.load({{token_embd_, "token_embd.weight", {c_.n_embd, c_.n_vocab}}});
}

void TokenEmbedding::forward(const ForwardContext& ctx, Matrix x) const {
  ctx.backend.get_rows(*token_embd_, ctx.inputs.tokens, x);  // [n][d]
  if (c_.embedding_scale != 1.0f) ctx.backend.scale(x, c_.embedding_scale, x);
  // Given embeddings (Batch::embd_rows, image embeddings) replace their rows' lookups.
  const std::span<const int32_t> rows = ctx.inputs.embd_rows;
  for (size_t i = 0; i < rows.size(); ++i) {
    ctx.backend.write_view(ctx.inputs.embd_values.data() + i * static_cast<size_t>(c_.n_embd),
                           x.row_range(rows[i], 1));
  }
}

Status OutputHead::load(WeightLoader& loader) {
  const ModelShard& shard = c_.shard;
  if (!shard.last_stage) return {};  // earlier pipeline stages pass the hidden state on
  // Vocabulary-parallel under tensor parallelism: this rank's rows of the output matrix.
  const Slice vocab = shard.tensor_parallel() ? rows_of(shard.columns(c_.n_vocab)) : Slice{};
  Status st = loader.load({
      {output_norm_, "output_norm.weight", {c_.n_embd}},
      {output_, "output.weight", {c_.n_embd, c_.n_vocab}, Load::IfPresent, vocab},
  });
  // Tied: the embedding's table, unless this rank needs only a slice of it or holds no
  // embedding (a later pipeline stage).
  if (st && !output_ && (vocab.dim >= 0 || !shard.first_stage)) {
    st = loader.load({{output_, "token_embd.weight", {c_.n_embd, c_.n_vocab}, Load::Required,
                       vocab}});
  }
  return st;
}

Status OutputHead::reserve(kernels::Backend& backend, const StepCapacity& capacity) {
  if (!c_.shard.last_stage) return {};
  return hidden_.reserve(backend, capacity.max_logit_rows, c_.n_embd);
}

void OutputHead::forward(const ForwardContext& ctx, const TokenEmbedding& embedding, Matrix x) {
  kernels::Backend& be = ctx.backend;
  const Matrix hidden = hidden_.rows(ctx.inputs.n_logits);
  be.gather_rows(x, ctx.inputs.logit_rows, hidden);  // only the rows whose logits are wanted
  if (ctx.hidden_only) {  // Model::forward_hidden: the normalized rows are the output
    be.rms_norm(hidden, *output_norm_, c_.rms_norm_eps, ctx.logits);
    return;
  }
  be.rms_norm(hidden, *output_norm_, c_.rms_norm_eps, hidden);
  be.matmul(output_ ? *output_ : embedding.table(), hidden, ctx.logits);  // [n_logits][V or V/tp]
  if (c_.logit_scale != 1.0f) be.scale(ctx.logits, c_.logit_scale, ctx.logits);
  if (c_.final_logit_softcap > 0) be.softcap(ctx.logits, c_.final_logit_softcap, ctx.logits);
}

void stage_input(const ForwardContext& ctx, const ModelConfig& config,
                 const TokenEmbedding& embedding, Matrix x) {
  if (config.shard.first_stage) {
    embedding.forward(ctx, x);
  } else {
    ctx.distributed->recv_hidden(ctx.backend, x);
  }
}

void stage_output(const ForwardContext& ctx, const ModelConfig& config, OutputHead& head,
                  const TokenEmbedding& embedding, Matrix x) {
  if (config.shard.last_stage) {
    if (ctx.inputs.n_logits > 0) head.forward(ctx, embedding, x);  // (a micro-batch may have none)
  } else {
    ctx.distributed->send_hidden(ctx.backend, x);
  }
}

}  // namespace cadenza::model::blocks
