// The forward pass of the llama family: a pre-norm decoder-only transformer.
//
//   x = token_embd[tokens]
//   for each layer:
//     h = rms_norm(x) * attn_norm
//     q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)          [qwen2: biases]
//     q, k = rms_norm per head (q_norm, k_norm)            [qwen3, qwen3moe]
//     q, k = rope(q, k, positions)                         [llama: normal pairs; qwen: NeoX halves]
//     kv[slot(token)] = k, v
//     a = paged causal attention(q, kv of the token's sequence), GQA, scale 1/sqrt(head_dim)
//     x = x + a Wo (+bo)
//     h = rms_norm(x) * ffn_norm
//     dense:  x = x + (silu(h Wgate) * (h Wup)) Wdown
//     experts [Mixtral-style llama, qwen3moe, qwen2moe]:
//             top-k of softmax(h Wrouter), weights renormalised;
//             x = x + sum_k w_k * (silu(h Wgate_k) * (h Wup_k)) Wdown_k
//     shared expert [qwen2moe]: (not renormalised top-k)
//             x = x + sigmoid(h . Wgate_inp_shexp) * (silu(h Wgate_sh) * (h Wup_sh)) Wdown_sh
//   logits = (rms_norm(x[rows wanted]) * output_norm) Woutput   [tied: Woutput = token_embd]
//
// Shapes in comments: n = tokens in the batch, d = n_embd, H/KV = query/KV heads, dk/dv = head
// dims, f = FFN width, E/K = experts / experts used, fs = shared expert width.
#include <cmath>

#include "model/forward.h"

namespace cadenza::model {

namespace {

using kernels::IndexMatrix;
using kernels::Matrix;

}  // namespace

Result<Matrix> forward_llama_family(const ForwardContext& ctx) {
  const ModelConfig& c = ctx.config;
  const ModelWeights& w = ctx.weights;
  kernels::Backend& be = ctx.backend;
  ForwardScratch& s = ctx.scratch;
  const StepInputs& in = ctx.inputs;
  const int64_t n = in.n_tokens;
  const int64_t q_cols = c.n_heads * c.head_dim_k;
  const int64_t k_cols = c.n_kv_heads * c.head_dim_k;
  const int64_t v_cols = c.n_kv_heads * c.head_dim_v;
  const int64_t attn_cols = c.n_heads * c.head_dim_v;
  const bool moe = c.n_experts > 0;
  const int64_t ffn_rows = moe ? n * c.n_experts_used : n;
  const int64_t ffn_cols = moe ? c.n_ff_expert : c.n_ff;

  // Activation buffers for this batch size.
  auto f32_bytes = [](int64_t rows, int64_t cols) { return static_cast<size_t>(rows * cols) * sizeof(float); };
  for (auto [buffer, bytes] : {std::pair{&s.x, f32_bytes(n, c.n_embd)},
                               std::pair{&s.h, f32_bytes(n, c.n_embd)},
                               std::pair{&s.q, f32_bytes(n, q_cols)},
                               std::pair{&s.k, f32_bytes(n, k_cols)},
                               std::pair{&s.v, f32_bytes(n, v_cols)},
                               std::pair{&s.attn, f32_bytes(n, attn_cols)},
                               std::pair{&s.gate, f32_bytes(ffn_rows, ffn_cols)},
                               std::pair{&s.up, f32_bytes(ffn_rows, ffn_cols)},
                               std::pair{&s.hidden_out, f32_bytes(in.n_logits, c.n_embd)},
                               std::pair{&s.logits, f32_bytes(in.n_logits, c.n_vocab)}}) {
    Status st = ensure_buffer(be, *buffer, bytes);
    if (!st) return st.error_value();
  }
  if (moe) {
    if (c.n_ff_shared_expert > 0) {
      const int64_t fs = c.n_ff_shared_expert;
      for (auto [buffer, bytes] : {std::pair{&s.shared_gate, f32_bytes(n, fs)},
                                   std::pair{&s.shared_up, f32_bytes(n, fs)},
                                   std::pair{&s.shared_out, f32_bytes(n, c.n_embd)},
                                   std::pair{&s.shared_weight, f32_bytes(n, 1)}}) {
        Status st = ensure_buffer(be, *buffer, bytes);
        if (!st) return st.error_value();
      }
    }
    for (auto [buffer, bytes] : {std::pair{&s.router, f32_bytes(n, c.n_experts)},
                                 std::pair{&s.expert_ids, f32_bytes(n, c.n_experts_used)},
                                 std::pair{&s.expert_weights, f32_bytes(n, c.n_experts_used)},
                                 std::pair{&s.expert_out, f32_bytes(ffn_rows, c.n_embd)}}) {
      Status st = ensure_buffer(be, *buffer, bytes);
      if (!st) return st.error_value();
    }
  }
  const Matrix x = Matrix::of(s.x->data(), n, c.n_embd);     // the residual stream
  const Matrix h = Matrix::of(s.h->data(), n, c.n_embd);     // normed input / block output
  const Matrix q = Matrix::of(s.q->data(), n, q_cols);
  const Matrix k = Matrix::of(s.k->data(), n, k_cols);
  const Matrix v = Matrix::of(s.v->data(), n, v_cols);
  const Matrix attn = Matrix::of(s.attn->data(), n, attn_cols);
  const Matrix gate = Matrix::of(s.gate->data(), ffn_rows, ffn_cols);
  const Matrix up = Matrix::of(s.up->data(), ffn_rows, ffn_cols);

  kernels::RopeParams rope;
  rope.n_dims = c.rope_dims;
  rope.freq_base = c.rope_freq_base;
  rope.freq_scale = c.rope_freq_scale;
  rope.layout = c.rope_layout;
  rope.freq_factors = w.rope_freqs.get();
  const float attention_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim_k));

  be.get_rows(*w.token_embd, in.tokens, x);  // x: [n][d]

  for (int64_t il = 0; il < c.n_layers; ++il) {
    const LayerWeights& L = w.layers[static_cast<size_t>(il)];

    // ---- attention ----
    be.rms_norm(x, *L.attn_norm, c.rms_norm_eps, h);
    be.matmul(*L.wq, h, q);  // [n][H*dk]
    be.matmul(*L.wk, h, k);  // [n][KV*dk]
    be.matmul(*L.wv, h, v);  // [n][KV*dv]
    if (L.bq) {
      be.add_bias(q, *L.bq, q);
      be.add_bias(k, *L.bk, k);
      be.add_bias(v, *L.bv, v);
    }
    if (L.q_norm) {  // one RMS norm per head: view [n][H*dk] as [n*H][dk]
      const Matrix q_heads = q.reshaped(n * c.n_heads, c.head_dim_k);
      const Matrix k_heads = k.reshaped(n * c.n_kv_heads, c.head_dim_k);
      be.rms_norm(q_heads, *L.q_norm, c.rms_norm_eps, q_heads);
      be.rms_norm(k_heads, *L.k_norm, c.rms_norm_eps, k_heads);
    }
    be.rope(q, static_cast<int32_t>(c.n_heads), static_cast<int32_t>(c.head_dim_k),
            in.attention.positions, rope);
    be.rope(k, static_cast<int32_t>(c.n_kv_heads), static_cast<int32_t>(c.head_dim_k),
            in.attention.positions, rope);
    const kernels::KvLayer& kv = ctx.kv.layer(il);
    be.kv_write(kv, k, v, in.slots);
    be.attention(q, kv, in.attention, static_cast<int32_t>(c.n_heads), attention_scale, attn);
    be.matmul(*L.wo, attn, h);  // [n][d]
    if (L.bo) be.add_bias(h, *L.bo, h);
    be.add(x, h, x);

    // ---- feed-forward ----
    be.rms_norm(x, *L.ffn_norm, c.rms_norm_eps, h);
    if (!moe) {
      be.matmul(*L.ffn_gate, h, gate);  // [n][f]
      be.matmul(*L.ffn_up, h, up);      // [n][f]
      be.swiglu(gate, up, gate);
      be.matmul(*L.ffn_down, gate, h);  // [n][d]
    } else {
      const int64_t K = c.n_experts_used;
      const Matrix router = Matrix::of(s.router->data(), n, c.n_experts);
      const IndexMatrix expert_ids = IndexMatrix::of(s.expert_ids->data(), n, K);
      const Matrix expert_weights = Matrix::of(s.expert_weights->data(), n, K);
      const Matrix expert_out = Matrix::of(s.expert_out->data(), n * K, c.n_embd);
      kernels::RoutingParams routing;
      routing.normalize_top_k = c.moe_normalize_top_k;
      routing.scale = c.moe_weights_scale;

      if (L.ffn_gate_shexp) {
        // The shared expert reads h, so it runs before the routed sum overwrites h; its gated
        // output waits in shared_out and joins the residual after the routed experts'.
        const int64_t fs = c.n_ff_shared_expert;
        const Matrix sh_gate = Matrix::of(s.shared_gate->data(), n, fs);
        const Matrix sh_up = Matrix::of(s.shared_up->data(), n, fs);
        const Matrix sh_out = Matrix::of(s.shared_out->data(), n, c.n_embd);
        const Matrix sh_weight = Matrix::of(s.shared_weight->data(), n, 1);
        be.matmul(*L.ffn_gate_shexp, h, sh_gate);  // [n][fs]
        be.matmul(*L.ffn_up_shexp, h, sh_up);      // [n][fs]
        be.swiglu(sh_gate, sh_up, sh_gate);
        be.matmul(*L.ffn_down_shexp, sh_gate, expert_out.row_range(0, n));  // [n][d]
        be.matmul(*L.ffn_gate_inp_shexp, h, sh_weight);                      // [n][1]
        be.sigmoid(sh_weight, sh_weight);
        be.weighted_sum_slots(expert_out.row_range(0, n), sh_weight, sh_out);  // [n][d]
      }
      be.matmul(*L.ffn_router, h, router);  // [n][E]
      be.route_experts(router, routing, expert_ids, expert_weights);
      if (ctx.expert_counts != nullptr) {
        s.expert_ids_host.resize(static_cast<size_t>(n * K));
        be.read(*s.expert_ids, 0, s.expert_ids_host.data(), s.expert_ids_host.size() * sizeof(int32_t));
        std::atomic<uint64_t>* counts = ctx.expert_counts + static_cast<size_t>(il * c.n_experts);
        for (const int32_t e : s.expert_ids_host) counts[e].fetch_add(1, std::memory_order_relaxed);
      }
      be.matmul_experts(*L.ffn_gate_exps, h, expert_ids, gate);  // [n*K][f]
      be.matmul_experts(*L.ffn_up_exps, h, expert_ids, up);      // [n*K][f]
      be.swiglu(gate, up, gate);
      be.matmul_experts(*L.ffn_down_exps, gate, expert_ids, expert_out);  // [n*K][d]
      be.weighted_sum_slots(expert_out, expert_weights, h);               // [n][d]
      if (L.ffn_gate_shexp) be.add(x, Matrix::of(s.shared_out->data(), n, c.n_embd), x);
    }
    be.add(x, h, x);
  }

  // ---- logits of the requested rows only ----
  const Matrix hidden = Matrix::of(s.hidden_out->data(), in.n_logits, c.n_embd);
  const Matrix logits = Matrix::of(s.logits->data(), in.n_logits, c.n_vocab);
  be.gather_rows(x, in.logit_rows, hidden);
  be.rms_norm(hidden, *w.output_norm, c.rms_norm_eps, hidden);
  be.matmul(w.lm_head(), hidden, logits);
  return logits;
}

}  // namespace cadenza::model
