// The Qwen3.5 hybrid decoder: the network of `qwen35` (dense FFN) and `qwen35moe` (routed experts
// with a gated shared expert in every layer); each family has its own file with its configure
// hook and registration (qwen35.cpp, qwen35moe.cpp) and shares this network.
//
//   x = token_embd[tokens]
//   for each layer:
//     x = x + Mixer(rms_norm(x) * attn_norm)           LinearAttention or GatedAttention
//     x = x + FFN(rms_norm(x) * post_attention_norm)   SwiGLU, or (qwen35moe)
//                                                      SharedExpert + RoutedExperts
//   logits = OutputHead(x[logit rows])                 (tied when there is no output.weight)
//
// Most layers mix tokens with a Gated DeltaNet linear-attention block (Yang et al. 2024) whose
// per-sequence state has a fixed size; every `full_attention_interval`-th layer (layers P-1,
// 2P-1, ...) with gated attention:
//  LinearAttention (per token, value heads h of dv, key heads of dk; ModelConfig::recurrent):
//    [q | k | v] = silu(short causal depthwise conv(attn_qkv x))   (ssm_conv1d, kernel K)
//    z = attn_gate x;  beta = ssm_beta x;  alpha = ssm_alpha x
//    o = gated delta rule(q, k, v; decay exp(ssm_a * softplus(alpha + ssm_dt.bias)),
//                         sigmoid(beta); L2-normalised q and k, q / sqrt(dk))
//    out = ssm_out(rms_norm_per_head(o) * ssm_norm * silu(z))
//  GatedAttention: attn_q gives per head [query (hd) | gate (hd)]; per-head RMS norm of q and k
//    (attn_{q,k}_norm), NeoX RoPE on the first rope.dimension_count elements of each head
//    (multi-section RoPE: every section sees the token's one position in text, so it is plain
//    partial RoPE), GQA paged attention, out = attn_output(attention * sigmoid(gate)).
// The recurrent state lives in the KV cache's state slots (kv_cache.h); the recurrent layers
// keep no K/V. The kernels: kernels::Backend::short_conv / gated_delta_rule. Internal to
// src/model.
#pragma once

#include <memory>
#include <vector>

#include "model/blocks/dense_ffn.h"
#include "model/blocks/embedding.h"
#include "model/blocks/routed_experts.h"
#include "model/blocks/shared_expert.h"
#include "model/forward.h"
#include "model/metadata.h"

namespace cadenza::model::arch {

// The hybrid layout both families share: the RoPE layout, Q/K norm, the recurrent shape and
// which layers are recurrent (from `full_attention_interval` and the `ssm.*` keys).
Status configure_qwen35_layers(const MetadataReader& md, ModelConfig& c);

class Qwen35Decoder final : public Network {
 public:
  // `config` must outlive the network.
  explicit Qwen35Decoder(const ModelConfig& config);

  Status load(WeightLoader& loader);
  Status reserve(kernels::Backend& backend, const StepCapacity& capacity) override;
  void forward(const ForwardContext& ctx) override;

 private:
  struct Layer {
    std::unique_ptr<kernels::Weight> attn_norm, ffn_norm;  // [d]
    std::unique_ptr<kernels::Weight> wo;  // attn_output or ssm_out
    // gated attention
    std::unique_ptr<kernels::Weight> wq, wk, wv, q_norm, k_norm;
    // linear attention
    std::unique_ptr<kernels::Weight> wqkv, wz, wbeta, walpha, conv, dt_bias, a, ssm_norm;
    blocks::DenseFfn::Weights ffn;           // qwen35
    blocks::RoutedExperts::Weights experts;  // qwen35moe
    blocks::SharedExpert::Weights shared;    // qwen35moe, with n_ff_shared_expert > 0
  };
  bool moe() const { return c_.n_experts > 0; }
  bool has_shared() const { return moe() && c_.n_ff_shared_expert > 0; }

  // h: [n][d] the normed input, overwritten with the block's output.
  void linear_attention(const ForwardContext& ctx, int64_t il, const Layer& L, kernels::Matrix h);
  void gated_attention(const ForwardContext& ctx, int64_t il, const Layer& L, kernels::Matrix h);
  // Adds the layer's FFN of h (the normed residual, [n][d], overwritten) into x.
  void feed_forward(const ForwardContext& ctx, int64_t il, const Layer& L, kernels::Matrix h,
                    kernels::Matrix x);

  const ModelConfig& c_;
  blocks::TokenEmbedding embedding_;
  blocks::DenseFfn ffn_;
  blocks::RoutedExperts experts_;
  blocks::SharedExpert shared_;
  blocks::OutputHead head_;
  std::vector<Layer> layers_;
  // [n][cols] scratch; qg_ and q_ double as the linear layers' projection and convolution, gate_
  // as z, out_ as the delta rule's output; shared_out_ the shared expert's output ([n][d]).
  ScratchMatrix x_, h_, qg_, q_, gate_, k_, v_, out_, alpha_, beta_, shared_out_;
};

}  // namespace cadenza::model::arch
