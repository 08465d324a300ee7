#include "model/blocks/attention.h"

#include <cmath>
#include <utility>

#include "gguf/gguf.h"

namespace cadenza::model::blocks {

using kernels::Matrix;

Status Attention::load_rope(WeightLoader& loader) {
  if (c_.has_rope_freqs_tensor) {
    return loader.load({{rope_freqs_, c_.rope_freqs_tensor, {c_.rope_dims / 2}}});
  }
  if (!c_.rope_freq_factors.empty()) {
    Result<std::unique_ptr<kernels::Weight>> w =
        loader.from_host("rope_freqs (from rope.scaling.* keys)", c_.rope_freq_factors);
    if (!w) return w.error_value();
    rope_freqs_ = std::move(*w);
  }
  return {};
}

Attention::Attention(const ModelConfig& config)
    : c_(config), heads_(config.shard.query_heads(config.n_heads)),
      kv_heads_(config.shard.kv_heads(config.n_kv_heads)) {}

Status Attention::load(WeightLoader& loader, int64_t layer, Weights& w) const {
  const int64_t d = c_.n_embd, dk = c_.head_dim_k, dv = c_.head_dim_v;
  const int64_t q_cols = c_.n_heads * dk;
  const int64_t k_cols = c_.n_kv_heads * dk;
  const int64_t v_cols = c_.n_kv_heads * dv;
  const int64_t attn_cols = c_.n_heads * dv;
  // This rank's heads (all of them in one process): rows of Wq/Wk/Wv, columns of Wo.
  const Slice q_rows = sliced(rows_of({heads_.begin * dk, heads_.count * dk}));
  const Slice k_rows = sliced(rows_of({kv_heads_.begin * dk, kv_heads_.count * dk}));
  const Slice v_rows = sliced(rows_of({kv_heads_.begin * dv, kv_heads_.count * dv}));
  const Slice q_bias = {q_rows.dim < 0 ? -1 : 0, q_rows.begin, q_rows.count};
  const Slice k_bias = {k_rows.dim < 0 ? -1 : 0, k_rows.begin, k_rows.count};
  const Slice v_bias = {v_rows.dim < 0 ? -1 : 0, v_rows.begin, v_rows.count};
  const Slice o_cols = sliced(columns_of({heads_.begin * dv, heads_.count * dv}));
  const Slice q_sinks = sliced(columns_of(heads_));  // this rank's heads' sinks
  auto name = [layer](const char* suffix) { return layer_tensor(layer, suffix); };
  const Load separate = c_.fused_qkv ? Load::Skip : Load::Required;
  if (c_.fused_qkv && c_.shard.tensor_parallel()) {
    return make_error("{}: tensor parallelism does not split the fused '{}' yet", loader.file().name(),
                      name("attn_qkv.weight"));
  }
  Status st = loader.load({
      {w.wqkv, name("attn_qkv.weight"), {d, q_cols + k_cols + v_cols}, required_if(c_.fused_qkv)},
      {w.wq, name("attn_q.weight"), {d, q_cols}, separate, q_rows},
      {w.wk, name("attn_k.weight"), {d, k_cols}, separate, k_rows},
      {w.wv, name("attn_v.weight"), {d, v_cols}, separate, v_rows},
      {w.wo, name("attn_output.weight"), {attn_cols, d}, Load::Required, o_cols},
      {w.bq, name("attn_q.bias"), {q_cols}, required_if(c_.qkv_bias), q_bias},
      {w.bk, name("attn_k.bias"), {k_cols}, required_if(c_.qkv_bias), k_bias},
      {w.bv, name("attn_v.bias"), {v_cols}, required_if(c_.qkv_bias), v_bias},
      {w.bo, name("attn_output.bias"), {d}, c_.output_bias ? Load::IfPresent : Load::Skip},
      {w.q_norm, name("attn_q_norm.weight"), {c_.head_dim_k}, required_if(c_.qk_norm)},
      {w.k_norm, name("attn_k_norm.weight"), {c_.head_dim_k}, required_if(c_.qk_norm)},
      {w.sinks, name("attn_sinks.weight"), {c_.n_heads}, required_if(c_.attn_sinks), q_sinks},
  });
  if (st && c_.qk_unweighted_norm && c_.uses_rope(layer)) {
    // Llama 4: the per-head norm has no weight in the file; a weight of ones is the same op.
    const std::vector<float> ones(static_cast<size_t>(c_.head_dim_k), 1.0f);
    Result<std::unique_ptr<kernels::Weight>> q = loader.from_host(name("attn_q_norm (ones)"), ones);
    if (!q) return q.error_value();
    Result<std::unique_ptr<kernels::Weight>> k = loader.from_host(name("attn_k_norm (ones)"), ones);
    if (!k) return k.error_value();
    w.q_norm = std::move(*q);
    w.k_norm = std::move(*k);
  }
  return st;
}

Slice Attention::sliced(Slice s) const { return c_.shard.tensor_parallel() ? s : Slice{}; }

Status Attention::reserve(kernels::Backend& backend, const StepCapacity& capacity) {
  const int64_t n = capacity.max_tokens;
  for (auto [scratch, cols] : {std::pair{&q_, heads_.count * c_.head_dim_k},
                               std::pair{&k_, kv_heads_.count * c_.head_dim_k},
                               std::pair{&v_, kv_heads_.count * c_.head_dim_v},
                               std::pair{&attn_, heads_.count * c_.head_dim_v}}) {
    if (Status st = scratch->reserve(backend, n, cols); !st) return st;
  }
  if (c_.fused_qkv) {
    return qkv_.reserve(backend, n, c_.n_heads * c_.head_dim_k + c_.n_kv_heads * c_.head_dim_k +
                                        c_.n_kv_heads * c_.head_dim_v);
  }
  return {};
}

void Attention::forward(const ForwardContext& ctx, int64_t layer, const Weights& w, Matrix h,
                        Matrix out) {
  kernels::Backend& be = ctx.backend;
  const int64_t n = ctx.inputs.n_tokens;
  const Matrix q = q_.rows(n), k = k_.rows(n), v = v_.rows(n), attn = attn_.rows(n);

  if (w.wqkv) {  // one matmul, then the q, k and v column blocks into their own scratch
    const Matrix qkv = qkv_.rows(n);  // [n][H*dk + KV*dk + KV*dv]
    be.matmul(*w.wqkv, h, qkv);
    auto columns = [&](int64_t begin, int64_t count) {
      return Matrix{qkv.data + begin, n, count, qkv.stride};
    };
    be.copy_matrix(columns(0, q.cols), q);
    be.copy_matrix(columns(q.cols, k.cols), k);
    be.copy_matrix(columns(q.cols + k.cols, v.cols), v);
  } else {
    be.matmul(*w.wq, h, q);  // [n][H*dk]
    be.matmul(*w.wk, h, k);  // [n][KV*dk]
    be.matmul(*w.wv, h, v);  // [n][KV*dv]
  }
  if (w.bq) {
    be.add_bias(q, *w.bq, q);
    be.add_bias(k, *w.bk, k);
    be.add_bias(v, *w.bv, v);
  }
  if (w.q_norm) {  // one RMS norm per head: view [n][H*dk] as [n*H][dk]
    const Matrix q_heads = q.reshaped(n * heads_.count, c_.head_dim_k);
    const Matrix k_heads = k.reshaped(n * kv_heads_.count, c_.head_dim_k);
    be.rms_norm(q_heads, *w.q_norm, c_.rms_norm_eps, q_heads);
    be.rms_norm(k_heads, *w.k_norm, c_.rms_norm_eps, k_heads);
  }
  kernels::RopeParams rope = c_.rope_params(layer);
  const int32_t window = c_.attention_window(layer);
  if (!(window > 0 && c_.rope_window_unscaled)) rope.freq_factors = rope_freqs_.get();
  // The window group's own blocks when the cache keeps one (KvCache::in_window_group).
  const bool window_group = ctx.kv.has_window_group() && ctx.kv.in_window_group(layer);
  const kernels::AttentionBatch& batch = window_group ? ctx.inputs.window_attention : ctx.inputs.attention;
  if (c_.uses_rope(layer)) {  // (Llama 4's NoPE layers do not rotate)
    be.rope(q, static_cast<int32_t>(heads_.count), static_cast<int32_t>(c_.head_dim_k),
            batch.positions, rope);
    be.rope(k, static_cast<int32_t>(kv_heads_.count), static_cast<int32_t>(c_.head_dim_k),
            batch.positions, rope);
  }
  if (c_.attention_temperature(layer)) {
    be.scale_by_position(q, batch.positions, c_.attn_temperature_beta, c_.attn_temperature_length,
                         c_.attn_temperature_offset, q);
  }

  const kernels::KvLayer& kv = ctx.kv.layer(layer);
  be.kv_write(kv, k, v, window_group ? ctx.inputs.window_slots : ctx.inputs.slots);
  kernels::AttentionParams params;
  params.scale = c_.attention_scale();
  params.sinks = w.sinks.get();
  params.window = window;
  params.chunk = c_.attention_chunk(layer);
  be.attention(q, kv, batch, static_cast<int32_t>(heads_.count), params, attn);  // [n][H*dv]
  be.matmul(*w.wo, attn, out);  // [n][d]; under tensor parallelism this rank's heads' share
  tp_all_reduce(ctx, out);
  if (w.bo) be.add_bias(out, *w.bo, out);
}

}  // namespace cadenza::model::blocks
