// qwen35moe: Qwen3.5's mixture-of-experts models (general.architecture "qwen35moe"). The qwen35
// hybrid network (qwen35.h: Gated DeltaNet and gated attention layers) with every layer's FFN
// replaced by routed experts (softmax over `expert_count`, the top `expert_used_count`, weights
// renormalised to sum 1 unless `expert_weights_norm` says otherwise) plus a shared expert of width
// `expert_shared_feed_forward_length` that every token runs, scaled by
// sigmoid(ffn_gate_inp_shexp . h) (blocks/shared_expert.h).
#include "model/arch/qwen35.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

Status configure(const MetadataReader& md, ModelConfig& c) {
  if (Status st = configure_qwen35_layers(md, c); !st) return st;
  Status st = read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::Required,
                                        .normalize_top_k = true});
  if (!st) return st;
  Result<int64_t> width = md.count_or("expert_shared_feed_forward_length", 0, 0, limits::kMaxFf);
  if (!width) return width.error_value();
  c.n_ff_shared_expert = *width;
  return {};
}

}  // namespace

extern const ArchitectureFamily qwen35moe_family{"qwen35moe", &configure,
                                                 &load_network<Qwen35Decoder>};

}  // namespace cadenza::model::arch
