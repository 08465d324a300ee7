#include "model/blocks/latent_attention.h"

#include <cmath>
#include <tuple>
#include <vector>

namespace cadenza::model::blocks {

using kernels::IndexMatrix;
using kernels::Matrix;

namespace {

float latent_scale(const ModelConfig& c) {
  const double dq = static_cast<double>(c.mla.nope + c.mla.rope);
  double m = 1.0;
  if (c.rope_scaling == RopeScaling::Yarn && c.yarn_log_multiplier != 0.0f) {
    m = 1.0 + c.yarn_log_multiplier * std::log(1.0 / c.rope_freq_scale);
  }
  return static_cast<float>(m * m / std::sqrt(dq));
}

// Columns [begin, begin + count) of every row of m.
Matrix columns(Matrix m, int64_t begin, int64_t count) {
  return {m.data + begin, m.rows, count, m.stride};
}

}  // namespace

LatentAttention::LatentAttention(const ModelConfig& config)
    : c_(config), heads_(config.shard.query_heads(config.n_heads)), scale_(latent_scale(config)) {}

Status LatentAttention::load(WeightLoader& loader, int64_t layer, Weights& w) const {
  const ModelConfig::LatentAttentionShape& m = c_.mla;
  const int64_t d = c_.n_embd, h = c_.n_heads, dq = m.nope + m.rope;
  const bool split = c_.shard.tensor_parallel();
  const Slice q_rows = split ? rows_of({heads_.begin * dq, heads_.count * dq}) : Slice{};
  const Slice head_matrices = split ? matrices_of(heads_) : Slice{};
  const Slice o_cols = split ? columns_of({heads_.begin * m.v, heads_.count * m.v}) : Slice{};
  const bool q_latent = m.q_rank > 0;
  auto name = [layer](const char* suffix) { return layer_tensor(layer, suffix); };
  return loader.load({
      {w.wq_a, name("attn_q_a.weight"), {d, m.q_rank}, required_if(q_latent)},
      {w.q_a_norm, name("attn_q_a_norm.weight"), {m.q_rank}, required_if(q_latent)},
      {w.wq_b, name("attn_q_b.weight"), {m.q_rank, h * dq}, required_if(q_latent), q_rows},
      {w.wq, name("attn_q.weight"), {d, h * dq}, required_if(!q_latent), q_rows},
      {w.wkv_a, name("attn_kv_a_mqa.weight"), {d, m.kv_rank + m.rope}},
      {w.kv_a_norm, name("attn_kv_a_norm.weight"), {m.kv_rank}},
      {w.wk_b, name("attn_k_b.weight"), {m.nope, m.kv_rank, h}, Load::Required, head_matrices},
      {w.wv_b, name("attn_v_b.weight"), {m.kv_rank, m.v, h}, Load::Required, head_matrices},
      {w.wo, name("attn_output.weight"), {h * m.v, d}, Load::Required, o_cols},
  });
}

Status LatentAttention::reserve(kernels::Backend& backend, const StepCapacity& capacity) {
  const ModelConfig::LatentAttentionShape& m = c_.mla;
  const int64_t n = capacity.max_tokens, h = heads_.count;
  const int64_t row = m.kv_rank + m.rope;
  for (auto [scratch, cols] : {std::tuple{&cq_, std::max<int64_t>(m.q_rank, 1)},
                               std::tuple{&q_, h * (m.nope + m.rope)},
                               std::tuple{&kv_, row},
                               std::tuple{&q_full_, h * row},
                               std::tuple{&out_latent_, h * m.kv_rank},
                               std::tuple{&o_, h * m.v}}) {
    if (Status st = scratch->reserve(backend, n, cols); !st) return st;
  }
  // The head index of every (token, head) pair, written for the whole reservation.
  if (Status st = head_ids_.reserve(backend, n, h); !st) return st;
  std::vector<int32_t> ids(static_cast<size_t>(n * h));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i % static_cast<size_t>(h));
  backend.write(head_ids_.buffer(), 0, ids.data(), ids.size() * sizeof(int32_t));
  return {};
}

void LatentAttention::forward(const ForwardContext& ctx, int64_t layer, const Weights& w, Matrix h,
                              Matrix out) {
  kernels::Backend& be = ctx.backend;
  const ModelConfig::LatentAttentionShape& m = c_.mla;
  const int64_t n = ctx.inputs.n_tokens, heads = heads_.count;
  const int64_t dq = m.nope + m.rope, row = m.kv_rank + m.rope;
  const Matrix q = q_.rows(n), kv = kv_.rows(n), q_full = q_full_.rows(n);
  const Matrix out_latent = out_latent_.rows(n), o = o_.rows(n);
  const IndexMatrix head_ids = head_ids_.rows(n);

  if (w.wq_a) {
    const Matrix cq = cq_.rows(n);
    be.matmul(*w.wq_a, h, cq);  // [n][rq]
    be.rms_norm(cq, *w.q_a_norm, c_.rms_norm_eps, cq);
    be.matmul(*w.wq_b, cq, q);  // [n][H*dq]
  } else {
    be.matmul(*w.wq, h, q);
  }
  be.matmul(*w.wkv_a, h, kv);  // [n][rkv + dr] = (c | kr)
  const Matrix latent = columns(kv, 0, m.kv_rank);
  be.rms_norm(latent, *w.kv_a_norm, c_.rms_norm_eps, latent);

  kernels::RopeParams rope = c_.rope_params();
  rope.n_dims = static_cast<int32_t>(m.rope);
  rope.attn_factor = 1.0f;  // DeepSeek's YaRN scales the softmax (scale_), not the rotation
  const kernels::AttentionBatch& batch = ctx.inputs.attention;
  // The RoPE part of every query head: a view starting at head 0's RoPE part, heads dq apart.
  const Matrix q_rope{q.data + m.nope, n, (heads - 1) * dq + m.rope, q.stride};
  be.rope(q_rope, static_cast<int32_t>(heads), static_cast<int32_t>(dq), batch.positions, rope);
  const Matrix k_rope = columns(kv, m.kv_rank, m.rope);
  be.rope(k_rope, 1, static_cast<int32_t>(m.rope), batch.positions, rope);

  // The absorbed query: per (token, head) row, Wkb[h] q_nope into the first rkv of the head's
  // row of q_full, then the rotated RoPE part after it.
  const Matrix q_heads = q.reshaped(n * heads, dq);
  const Matrix full_heads = q_full.reshaped(n * heads, row);
  be.matmul_experts(*w.wk_b, columns(q_heads, 0, m.nope), head_ids,
                    columns(full_heads, 0, m.kv_rank));
  be.copy_matrix(columns(q_heads, m.nope, m.rope), columns(full_heads, m.kv_rank, m.rope));

  const kernels::KvLayer& cache = ctx.kv.layer(layer);
  be.kv_write(cache, kv, Matrix{}, ctx.inputs.slots);
  be.attention(q_full, cache, batch, static_cast<int32_t>(heads), {.scale = scale_}, out_latent);

  be.matmul_experts(*w.wv_b, out_latent.reshaped(n * heads, m.kv_rank), head_ids,
                    o.reshaped(n * heads, m.v));  // [n][H*dv]
  be.matmul(*w.wo, o, out);  // [n][d]; under tensor parallelism this rank's heads' share
  tp_all_reduce(ctx, out);
}

}  // namespace cadenza::model::blocks
