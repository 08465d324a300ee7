// llama4: Llama 4 (Scout, Maverick; general.architecture "llama4"). Llama attention with
// interleaved RoPE ("iRoPE") and interleaved mixture-of-experts layers:
//
//   x = token_embd[tokens]
//   for each layer:
//     x = x + Attention(rms_norm(x) * attn_norm)
//         RoPE layers: rotate q and k, normalise them per head without a weight, attend within
//           the token's chunk of 8192 positions (p - p % 8192 .. p);
//         NoPE layers, every 4th ((il + 1) % 4 == 0): no rotation, every earlier position, q
//           scaled by 1 + 0.1 ln(1 + floor((p + 1) / 8192)) (the attention temperature)
//     x = x + FFN(rms_norm(x) * ffn_norm)
//         expert layers, every `interleave_moe_layer_step`-th: SharedExpert(h) + the chosen
//           expert's FFN of (sigmoid(router logit) * h), one expert per token;
//         the others: a dense SwiGLU FFN of `feed_forward_length`
//   logits = OutputHead(x[logit rows])
//
// The file carries neither the RoPE pattern, the chunk, the temperature nor the Q/K norm switch;
// they are Llama 4's published configuration (no_rope_layer_interval 4, attention_chunk_size
// 8192, floor_scale 8192, attn_scale 0.1), and the Q/K norm is off for 128 experts (Maverick's
// use_qk_norm false), on otherwise (Scout). The shared expert's width is its tensor's.
// The network: arch/mixture_decoder.h (shared with glm4moe).
#include "gguf/gguf.h"
#include "model/arch/mixture_decoder.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

constexpr int64_t kNoRopeInterval = 4;
constexpr int64_t kAttentionChunk = 8192;
constexpr int32_t kTemperatureLength = 8192;
constexpr float kTemperatureScale = 0.1f;
constexpr int64_t kMaverickExperts = 128;

Status configure(const MetadataReader& md, ModelConfig& c) {
  const std::string& file = md.file().name();
  c.nope_interval = kNoRopeInterval;
  c.attn_chunk = kAttentionChunk;
  c.attn_temperature_beta = kTemperatureScale;
  c.attn_temperature_length = kTemperatureLength;
  c.attn_temperature_offset = 1;
  c.attn_temperature_nope_only = true;
  Status st = read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::Required,
                                        .normalize_top_k = false,
                                        .gating_func = 2});
  if (!st) return st;
  c.qk_unweighted_norm = c.n_experts != kMaverickExperts;
  c.moe_weight_input = true;
  Result<int64_t> step = md.count_or("interleave_moe_layer_step", 1, 1, limits::kMaxLayers);
  if (!step) return step.error_value();
  c.moe_interleave_step = *step;
  bool any_dense = false;
  for (int64_t il = 0; il < c.n_layers; ++il) any_dense = any_dense || c.dense_ffn_layer(il);
  if (any_dense && c.n_ff == 0) {
    return make_error("{}: key '{}' is missing or 0, but '{}' = {} leaves dense layers", file,
                      md.key("feed_forward_length"), md.key("interleave_moe_layer_step"), *step);
  }
  // The shared expert: its width from the first expert layer's tensor (none without it).
  const int64_t first_moe = *step - 1;
  if (const gguf::TensorInfo* t =
          md.file().find_tensor(layer_tensor(first_moe, "ffn_gate_shexp.weight"));
      t != nullptr && t->shape.size() == 2) {
    c.n_ff_shared_expert = t->shape[1];
  }
  return {};
}

}  // namespace

extern const ArchitectureFamily llama4_family{"llama4", &configure,
                                              &load_network<MixtureDecoder>};

}  // namespace cadenza::model::arch
