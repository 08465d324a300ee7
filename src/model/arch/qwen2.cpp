// qwen2: Qwen2 and Qwen2.5 (dense). The llama decoder (llama.h) with q/k/v biases in every layer
// and RoPE on halves (NeoX); the output is usually tied to the embedding.
#include "model/arch/llama.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

Status configure(const MetadataReader& md, ModelConfig& c) {
  c.rope_layout = kernels::RopeLayout::NeoX;
  c.qkv_bias = true;
  return read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::None});
}

}  // namespace

extern const ArchitectureFamily qwen2_family{"qwen2", &configure, &load_network<LlamaDecoder>};

}  // namespace cadenza::model::arch
