// Multi-head latent attention (MLA, DeepSeek-V2 / V3, Kimi-K2) over the compressed KV cache.
//
// Per token the cache holds one row of rkv + dr elements: the normalised KV latent c and the
// shared RoPE key kr. Attention runs in the latent space with the key and value up-projections
// absorbed (DeepSeek-V2 paper, section 2.1.2): for head h
//   score(t, p) = q_nope[h] . (Wkb[h] c_p) + q_rope[h] . kr_p = (Wkb[h]^T q_nope[h]) . c_p + ...
//   out[h]      = Wvb[h] (sum_p softmax(score) c_p)
// so the cache never holds per-head keys or values: rkv + dr elements per token and layer instead
// of H * (dq + dv) for the expanded form (576 against 40960 for DeepSeek-V3).
//
//   cq      = rms_norm(h Wqa) * q_a_norm;  q = cq Wqb      [n][rq], [n][H*dq]   (rq > 0)
//   q       = h Wq                                          [n][H*dq]           (rq == 0: V2-Lite)
//   kv      = h Wkva                                        [n][rkv + dr] = (c | kr)
//   c       = rms_norm(c) * kv_a_norm                       in place
//   kr, q_rope = rope(kr), rope(q[h][dn:dq])                the last dr of each q head
//   ql[h]   = Wkb[h] q_nope[h]                              [n*H][rkv] into qf's first rkv
//   qf[h]   = (ql[h] | q_rope[h])                           [n][H*(rkv + dr)]
//   cache[slot(token)] = kv                                 one row of rkv + dr
//   ol      = attention(qf, cache; values = the first rkv of each row), scale s   [n][H*rkv]
//   o[h]    = Wvb[h] ol[h]                                  [n*H][dv] = [n][H*dv]
//   out     = o Wo                                          [n][d]
//
// Shapes: n tokens, d = n_embd, H heads, dq = dn + dr (key_length_mla), dn / dr = no-RoPE / RoPE
// parts, dv = value_length_mla, rq / rkv = q_lora_rank / kv_lora_rank. s = m^2 / sqrt(dq) with
// m = 1 + yarn_log_multiplier * ln(factor) under YaRN (else m = 1); the rotation itself is not
// scaled (the DeepSeek YaRN convention).
// Tensors, per layer: `blk.N.attn_q_a.weight` [rq][d], `attn_q_a_norm.weight` [rq],
// `attn_q_b.weight` [H*dq][rq] (or `attn_q.weight` [H*dq][d] without rq), `attn_kv_a_mqa.weight`
// [rkv+dr][d], `attn_kv_a_norm.weight` [rkv], `attn_k_b.weight` [H][rkv][dn], `attn_v_b.weight`
// [H][dv][rkv], `attn_output.weight` [d][H*dv].
//
// Tensor parallel (config.shard): this rank's heads (rows of Wqb / Wq, matrices of Wkb / Wvb,
// columns of Wo; the output all-reduced); Wqa, Wkva and the latent cache are whole on every rank.
//
// One object per model (shape, scratch); one Weights per layer. Not thread-safe (scratch).
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/backend.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/scratch.h"
#include "model/weight_loader.h"

namespace cadenza::model::blocks {

class LatentAttention {
 public:
  struct Weights {
    std::unique_ptr<kernels::Weight> wq_a, q_a_norm, wq_b;  // with a query latent (rq > 0)
    std::unique_ptr<kernels::Weight> wq;                    // without (rq == 0)
    std::unique_ptr<kernels::Weight> wkv_a, kv_a_norm;
    std::unique_ptr<kernels::Weight> wk_b, wv_b, wo;
  };

  // `config` (its `mla` shape) must outlive the block.
  explicit LatentAttention(const ModelConfig& config);

  Status load(WeightLoader& loader, int64_t layer, Weights& w) const;
  Status reserve(kernels::Backend& backend, const StepCapacity& capacity);

  // h: [n][d] (the normed residual); out: [n][d], may be h. Writes layer `layer`'s cache rows.
  void forward(const ForwardContext& ctx, int64_t layer, const Weights& w, kernels::Matrix h,
               kernels::Matrix out);

  // The softmax scale (see above).
  float scale() const { return scale_; }

 private:
  const ModelConfig& c_;
  dist::Range heads_;  // this rank's heads
  float scale_;
  // [n][rq], [n][H*dq], [n][rkv+dr], [n][H*(rkv+dr)], [n][H*rkv], [n][H*dv]
  ScratchMatrix cq_, q_, kv_, q_full_, out_latent_, o_;
  ScratchIndices head_ids_;  // [n][H]: 0..H-1 in every row (the "expert" of each head's matmul)
};

}  // namespace cadenza::model::blocks
