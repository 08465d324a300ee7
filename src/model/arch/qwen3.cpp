// qwen3: Qwen3 (dense). The llama decoder (llama.h) with a per-head RMS norm of q and k before
// RoPE (attn_{q,k}_norm), RoPE on halves (NeoX), and the head dim from `key_length` (heads x
// head dim may differ from the embedding width).
#include "model/arch/llama.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

Status configure(const MetadataReader& md, ModelConfig& c) {
  c.rope_layout = kernels::RopeLayout::NeoX;
  c.qk_norm = true;
  return read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::None});
}

}  // namespace

extern const ArchitectureFamily qwen3_family{"qwen3", &configure, &load_network<LlamaDecoder>};

}  // namespace cadenza::model::arch
