// llama: Llama 2 and 3, Mistral, TinyLlama; Mixtral when `llama.expert_count` > 0. RoPE on
// adjacent pairs; q/k/v biases when layer 0 has them; an optional output bias. The network is the
// llama decoder (llama.h), which qwen2, qwen3 and qwen3moe share.
#include "model/arch/llama.h"

#include "gguf/gguf.h"
#include "model/metadata.h"
#include "model/registry.h"

namespace cadenza::model::arch {

namespace {

Status configure(const MetadataReader& md, ModelConfig& c) {
  c.rope_layout = kernels::RopeLayout::Normal;
  // Biases are optional for llama: when layer 0 has them, every layer must.
  c.qkv_bias = md.file().find_tensor("blk.0.attn_q.bias") != nullptr;
  c.output_bias = true;  // attn_output.bias, in the layers that have one
  return read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::Optional,
                                   .normalize_top_k = true});
}

}  // namespace

extern const ArchitectureFamily llama_family{"llama", &configure, &load_network<LlamaDecoder>};

// ---- the llama decoder ----

using kernels::Matrix;

LlamaDecoder::LlamaDecoder(const ModelConfig& c)
    : c_(c), embedding_(c), attention_(c), ffn_(c, c.n_ff), experts_(c), head_(c) {}

Status LlamaDecoder::load(WeightLoader& loader) {
  Status st = embedding_.load(loader);
  if (st) st = head_.load(loader);
  if (st) st = attention_.load_rope(loader);
  layers_.resize(static_cast<size_t>(c_.n_layers));
  for (int64_t il = c_.shard.layer_begin; st && il < c_.shard.layer_end; ++il) {
    Layer& L = layers_[static_cast<size_t>(il)];
    st = loader.load({{L.attn_norm, layer_tensor(il, "attn_norm.weight"), {c_.n_embd}},
                      {L.ffn_norm, layer_tensor(il, "ffn_norm.weight"), {c_.n_embd}}});
    if (st) st = attention_.load(loader, il, L.attention);
    if (st) st = moe() ? experts_.load(loader, il, L.experts) : ffn_.load(loader, il, L.ffn);
  }
  return st;
}

Status LlamaDecoder::reserve(kernels::Backend& be, const StepCapacity& cap) {
  Status st = x_.reserve(be, cap.max_tokens, c_.n_embd);
  if (st) st = h_.reserve(be, cap.max_tokens, c_.n_embd);
  if (st) st = attention_.reserve(be, cap);
  if (st) st = moe() ? experts_.reserve(be, cap) : ffn_.reserve(be, cap);
  if (st) st = head_.reserve(be, cap);
  return st;
}

void LlamaDecoder::forward(const ForwardContext& ctx) {
  kernels::Backend& be = ctx.backend;
  const int64_t n = ctx.inputs.n_tokens;
  const Matrix x = x_.rows(n), h = h_.rows(n);
  blocks::stage_input(ctx, c_, embedding_, x);
  for (int64_t il = c_.shard.layer_begin; il < c_.shard.layer_end; ++il) {
    const Layer& L = layers_[static_cast<size_t>(il)];
    be.rms_norm(x, *L.attn_norm, c_.rms_norm_eps, h);
    attention_.forward(ctx, il, L.attention, h, h);
    if (c_.residual_scale != 1.0f) be.scale(h, c_.residual_scale, h);
    be.add(x, h, x);
    be.rms_norm(x, *L.ffn_norm, c_.rms_norm_eps, h);
    if (moe()) {
      experts_.forward(ctx, il, L.experts, h, h);
    } else {
      ffn_.forward(ctx, L.ffn, h, h);
    }
    if (c_.residual_scale != 1.0f) be.scale(h, c_.residual_scale, h);
    be.add(x, h, x);
  }
  blocks::stage_output(ctx, c_, head_, embedding_, x);
}

}  // namespace cadenza::model::arch
