// The llama decoder: the network of `llama` (Llama 2/3, Mistral, TinyLlama; Mixtral when
// `expert_count` > 0) and of the families that differ from it only in configuration flags:
// `qwen2` (QKV biases, NeoX RoPE), `qwen3` (per-head Q/K norm), `qwen3moe` (qwen3 attention,
// experts in every layer), `mistral3` (YaRN, attention temperature), `granite` (multipliers),
// `phi3` (fused QKV and gate/up, NeoX RoPE, LongRoPE factors). Each of those has its own file
// with its configure hook and its registration; they share this network.
//
//   x = token_embd[tokens]
//   for each layer:
//     x = x + Attention(rms_norm(x) * attn_norm)   biases, Q/K norm, RoPE layout per the config
//     x = x + FFN(rms_norm(x) * ffn_norm)          DenseFfn, or RoutedExperts when n_experts > 0
//   (granite: each block's output times config.residual_scale before the add)
//   logits = OutputHead(x[logit rows])
//
// The blocks and their shapes: src/model/blocks/*.h. Internal to src/model.
#pragma once

#include <memory>
#include <vector>

#include "model/blocks/attention.h"
#include "model/blocks/dense_ffn.h"
#include "model/blocks/embedding.h"
#include "model/blocks/routed_experts.h"
#include "model/forward.h"

namespace cadenza::model::arch {

class LlamaDecoder final : public Network {
 public:
  // `config` must outlive the network.
  explicit LlamaDecoder(const ModelConfig& config);

  Status load(WeightLoader& loader);
  Status reserve(kernels::Backend& backend, const StepCapacity& capacity) override;
  void forward(const ForwardContext& ctx) override;

 private:
  struct Layer {
    std::unique_ptr<kernels::Weight> attn_norm, ffn_norm;  // [d]
    blocks::Attention::Weights attention;
    blocks::DenseFfn::Weights ffn;           // dense models
    blocks::RoutedExperts::Weights experts;  // mixture-of-experts models
  };
  bool moe() const { return c_.n_experts > 0; }

  const ModelConfig& c_;
  blocks::TokenEmbedding embedding_;
  blocks::Attention attention_;
  blocks::DenseFfn ffn_;
  blocks::RoutedExperts experts_;
  blocks::OutputHead head_;
  std::vector<Layer> layers_;
  ScratchMatrix x_, h_;  // [n][d]: the residual stream; a block's input, then its output
};

}  // namespace cadenza::model::arch
