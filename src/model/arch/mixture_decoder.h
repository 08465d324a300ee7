// The decoder of the families whose layers are the attention block followed by a MixtureFfn
// (dense, or routed plus shared experts, per layer): `glm4moe` and `llama4`. Each has its own file
// with its configure hook and registration; the flags that tell them apart are in the config
// (the attention block's options, ModelConfig::dense_ffn_layer, moe_weight_input,
// ffn_norm_tensor).
//
//   x = token_embd[tokens]
//   for each layer:
//     x = x + Attention(rms_norm(x) * attn_norm)
//     x = x + MixtureFfn(rms_norm(x) * <ffn_norm_tensor>)
//   logits = OutputHead(x[logit rows])
//
// The blocks and their shapes: src/model/blocks/*.h. Internal to src/model.
#pragma once

#include <memory>
#include <vector>

#include "model/blocks/attention.h"
#include "model/blocks/embedding.h"
#include "model/blocks/mixture_ffn.h"
#include "model/forward.h"

namespace cadenza::model::arch {

class MixtureDecoder final : public Network {
 public:
  // `config` must outlive the network.
  explicit MixtureDecoder(const ModelConfig& config);

  Status load(WeightLoader& loader);
  Status reserve(kernels::Backend& backend, const StepCapacity& capacity) override;
  void forward(const ForwardContext& ctx) override;

 private:
  struct Layer {
    std::unique_ptr<kernels::Weight> attn_norm, ffn_norm;  // [d]
    blocks::Attention::Weights attention;
    blocks::MixtureFfn::Weights ffn;
  };

  const ModelConfig& c_;
  blocks::TokenEmbedding embedding_;
  blocks::Attention attention_;
  blocks::MixtureFfn ffn_;
  blocks::OutputHead head_;
  std::vector<Layer> layers_;
  ScratchMatrix x_, h_;  // [n][d]: the residual stream; a block's input, then its output
};

}  // namespace cadenza::model::arch
