// qwen3moe: Qwen3 mixture-of-experts (Qwen3-30B-A3B, ...). The llama decoder (llama.h) with qwen3's
// attention (per-head Q/K norm, NeoX RoPE) and routed experts in every layer: softmax top-k,
// weights renormalised to sum 1 unless `expert_weights_norm` says otherwise.
#include "model/arch/llama.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

Status configure(const MetadataReader& md, ModelConfig& c) {
  c.rope_layout = kernels::RopeLayout::NeoX;
  c.qk_norm = true;
  return read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::Required,
                                   .normalize_top_k = true});
}

}  // namespace

extern const ArchitectureFamily qwen3moe_family{"qwen3moe", &configure,
                                                &load_network<LlamaDecoder>};

}  // namespace cadenza::model::arch
