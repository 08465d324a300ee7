// Attention block: grouped-query self-attention with RoPE over the paged KV cache, with the
// options of the llama family (QKV biases, an output bias, per-head Q/K RMS norm) and of gpt-oss
// (attention sinks, a sliding window on some layers).
//
//   q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)     [n][H*dk], [n][KV*dk], [n][KV*dv]
//             (config.fused_qkv: one h Wqkv, split by columns: phi3)
//   q, k    = rms_norm per head * q_norm, k_norm      [config.qk_norm: qwen3*], as [n*H][dk]
//             (config.qk_unweighted_norm: llama4's norm without a weight, on its RoPE layers;
//             before RoPE here, which is the same: its whole-head rotation, without an
//             attention factor, keeps a head's RMS)
//   q, k    = rope(q, k, positions)                   layout and scaling from the config
//             (config.rope_params(layer): windowed layers may have their own base: gemma3;
//             none on llama4's NoPE layers, config.uses_rope(layer))
//   q       = q * (1 + beta ln(1 + floor((pos + o) / L)))   [config.attention_temperature(layer):
//             mistral3 every layer, llama4 its NoPE layers]
//   kv[slot(token)] = k, v                            this layer's paged store
//   a       = causal attention(q, K/V of the token's sequence), GQA,
//             scale config.attention_scale() (1/sqrt(dk) unless the family sets it)   [n][H*dv]
//             (config.attn_sinks: each head's sink logit in its softmax denominator;
//             config.attention_window(layer) > 0: the last that many positions only;
//             config.attention_chunk(layer) > 0: llama4's chunks, p - p % chunk .. p)
//   out     = a Wo (+bo)                              [n][d]
//
// Shapes: n = tokens of the step, d = n_embd, H / KV = query / KV heads, dk / dv = head dims.
// Tensors: `rope_freqs.weight` [dk/2] once per model (Llama 3 divisors; or computed from the
// rope.scaling.* keys; phi3: `rope_factors_short.weight`); per layer
// `blk.N.attn_{q,k,v,output}.weight` (or `attn_qkv.weight` and `attn_output.weight`), `blk.N.attn_{q,k,v}.bias`
// (when config.qkv_bias), `blk.N.attn_output.bias` (where present, when config.output_bias),
// `blk.N.attn_{q,k}_norm.weight` [dk] (when config.qk_norm), `blk.N.attn_sinks.weight` [H] (when
// config.attn_sinks). Windowed layers read and write the cache's window group when it keeps one
// (KvCache::in_window_group: their own blocks, StepInputs::window_slots / window_attention), so
// the engine can release the blocks behind a sequence's window.
//
// One Attention object per model holds the shape, the RoPE table and the step's scratch; the
// per-layer tensors are in one Weights per layer. Not thread-safe (scratch).
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/backend.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/scratch.h"
#include "model/weight_loader.h"

namespace cadenza::model::blocks {

class Attention {
 public:
  struct Weights {
    std::unique_ptr<kernels::Weight> wq, wk, wv, wo;  // [H*dk][d], [KV*dk][d], [KV*dv][d], [d][H*dv]
    std::unique_ptr<kernels::Weight> wqkv;  // [H*dk + KV*dk + KV*dv][d] instead of wq/wk/wv, or null
    std::unique_ptr<kernels::Weight> bq, bk, bv, bo;  // biases, or null
    std::unique_ptr<kernels::Weight> q_norm, k_norm;  // [dk], or null
    std::unique_ptr<kernels::Weight> sinks;           // [H], or null
  };

  // `config` must outlive the block. Under tensor parallelism (config.shard) the block holds
  // this rank's query and KV heads only (Wq/Wk/Wv rows, Wo columns, biases) and all-reduces Wo's
  // partial output before the bias; the per-head Q/K norms are whole.
  explicit Attention(const ModelConfig& config);

  // The model-wide RoPE table (rope_freqs), if the config has one.
  Status load_rope(WeightLoader& loader);
  // Layer `layer`'s tensors.
  Status load(WeightLoader& loader, int64_t layer, Weights& w) const;
  Status reserve(kernels::Backend& backend, const StepCapacity& capacity);

  // h: [n][d] (the normed residual); out: [n][d], may be h. Writes layer `layer`'s K/V.
  void forward(const ForwardContext& ctx, int64_t layer, const Weights& w, kernels::Matrix h,
               kernels::Matrix out);

 private:
  Slice sliced(Slice s) const;  // `s` under tensor parallelism, else the whole tensor

  const ModelConfig& c_;
  dist::Range heads_, kv_heads_;  // this rank's heads (all of them in one process)
  std::unique_ptr<kernels::Weight> rope_freqs_;  // null: no per-pair divisors
  // [n][H*dk], [n][KV*dk], [n][KV*dv], [n][H*dv], H and KV this rank's head counts
  ScratchMatrix q_, k_, v_, attn_;
  ScratchMatrix qkv_;  // [n][H*dk + KV*dk + KV*dv] (config.fused_qkv)
};

}  // namespace cadenza::model::blocks
