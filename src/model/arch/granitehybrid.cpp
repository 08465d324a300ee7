// granitehybrid: IBM Granite 4.0's hybrid models (general.architecture "granitehybrid": Granite
// 4.0-H-Micro, -Tiny, -Small). Mamba-2 layers (Dao and Gu 2024, "Transformers are SSMs") with an
// attention layer here and there, Granite's four multipliers (granite.h), and per the file either
// a dense SwiGLU FFN or routed experts plus an ungated shared expert in every layer.
//
//   x = token_embd[tokens] * embedding_scale
//   for each layer:
//     x = x + s Mixer(rms_norm(x) * attn_norm)      Mamba2 or Attention     (s = residual_scale)
//     x = x + s FFN(rms_norm(x) * ffn_norm)         DenseFfn, or SharedExpert + RoutedExperts
//   logits = OutputHead(x[logit rows]) / logit_scale (tied when there is no output.weight)
//
// Which layers are which: `attention.head_count_kv` per layer, 0 on the Mamba-2 layers.
// Attention (blocks/attention.h): GQA, no biases, softmax scale `attention.scale`; RoPE (normal
// layout) only when `rope.scaling.finetuned` is true or missing: Granite 4.0-H's files set it false
// (no positional encoding, HF position_embedding_type "nope"). Measured on the reference engine:
// the key switches its RoPE, and a file without it rotates.
//
// Mamba2 (per token; H heads of P = inner / H, G groups of state N; head h reads group
// h / (H / G)):
//   [z | xBC | dt] = ssm_in x                       [inner], [inner + 2 G N], [H]
//   xBC = silu(short causal depthwise conv(xBC) + ssm_conv1d.bias)   (ssm_conv1d, kernel K)
//   [x | B | C] = xBC                               [H][P], [G][N], [G][N]
//   dt = softplus(dt + ssm_dt.bias);  S_h = exp(dt_h ssm_a_h) S_h + B_g (dt_h x_h)^T
//   y_h = S_h^T C_g + ssm_d_h x_h                   (S_h: [N][P], per sequence)
//   y = rms_norm per group of inner / G (y * silu(z)) * ssm_norm;  out = ssm_out y
// The state lives in the KV cache's state slots as qwen35's (ModelConfig::RecurrentShape with
// k_heads = G, k_dim = N, v_heads = H, v_dim = P; kv_cache.h), so forks, preemption and batching
// work the same way. The kernels: kernels::Backend::short_conv (with its bias) and ssm_scan.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/arch/granite.h"
#include "model/blocks/attention.h"
#include "model/blocks/embedding.h"
#include "model/blocks/mixture_ffn.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/metadata.h"
#include "model/registry.h"
#include "model/scratch.h"
#include "model/weight_loader.h"

namespace cadenza::model::arch {

namespace {

using kernels::Matrix;

Status configure(const MetadataReader& md, ModelConfig& c) {
  const std::string& file = md.file().name();
  c.rope_layout = kernels::RopeLayout::Normal;
  Result<bool> rope = md.flag_or("rope.scaling.finetuned", true);
  if (!rope) return rope.error_value();
  // No RoPE: every layer a "NoPE" layer (ModelConfig::uses_rope).
  if (!*rope) c.nope_interval = 1;
  if (Status st = read_granite_multipliers(md, c); !st) return st;
  if (Status st = read_recurrent_shape(md, c); !st) return st;
  if (c.layer_kv_heads.empty()) {
    return make_error("{}: key '{}' must give the KV head count per layer (0 on the Mamba-2 "
                      "layers)", file, md.key("attention.head_count_kv"));
  }
  c.recurrent_layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t il = 0; il < c.n_layers; ++il) {
    c.recurrent_layers[static_cast<size_t>(il)] = c.layer_kv_heads[static_cast<size_t>(il)] == 0;
  }
  Status st = read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::Optional,
                                        .normalize_top_k = true});
  if (!st) return st;
  if (c.n_experts == 0) {
    // A dense model: MixtureFfn's leading dense layers are all of them.
    c.n_leading_dense = c.n_layers;
    return {};
  }
  Result<int64_t> width = md.count_or("expert_shared_feed_forward_length", 0, 0, limits::kMaxFf);
  if (!width) return width.error_value();
  c.n_ff_shared_expert = *width;
  return {};
}

class GraniteHybridDecoder final : public Network {
 public:
  // `config` must outlive the network.
  explicit GraniteHybridDecoder(const ModelConfig& c)
      : c_(c), embedding_(c), attention_(c), ffn_(c), head_(c) {}

  Status load(WeightLoader& loader);
  Status reserve(kernels::Backend& backend, const StepCapacity& capacity) override;
  void forward(const ForwardContext& ctx) override;

 private:
  struct Layer {
    std::unique_ptr<kernels::Weight> attn_norm, ffn_norm;  // [d]
    blocks::Attention::Weights attention;                  // attention layers
    // Mamba-2 layers: ssm_in [proj][d], ssm_conv1d [xBC][K] (f32) and its bias [xBC],
    // ssm_dt.bias / ssm_a / ssm_d [H], ssm_norm one [inner / G] vector per group, ssm_out [d][inner]
    std::unique_ptr<kernels::Weight> in, conv, conv_bias, dt_bias, a, d, out;
    std::vector<std::unique_ptr<kernels::Weight>> norm;
    blocks::MixtureFfn::Weights ffn;
  };
  int64_t inner() const { return c_.recurrent.v_heads * c_.recurrent.v_dim; }
  int64_t xbc() const { return c_.recurrent.conv_channels(); }

  Status load_mamba(WeightLoader& loader, int64_t il, Layer& L) const;
  // h: [n][d] the normed input, overwritten with the block's output.
  void mamba(const ForwardContext& ctx, int64_t il, const Layer& L, Matrix h);

  const ModelConfig& c_;
  blocks::TokenEmbedding embedding_;
  blocks::Attention attention_;
  blocks::MixtureFfn ffn_;
  blocks::OutputHead head_;
  std::vector<Layer> layers_;
  // [n][d] the residual stream and a block's input/output; [n][2 inner + 2 G N + H] ssm_in's
  // output (z, xBC, dt); [n][xBC] the convolution's output; [n][inner] the scan's output.
  ScratchMatrix x_, h_, proj_, conv_, y_;
};

// Loads the f32 tensor `name` of file shape `shape` (checked, and counted as used) and uploads it
// as `parts` vectors of equal length, in order (ssm_a and ssm_d are [1][H] in the file; ssm_norm
// is [G][inner / G]: one weight vector per group).
Status load_vectors(WeightLoader& loader, const std::string& name, std::vector<int64_t> shape,
                    int64_t parts, std::vector<std::unique_ptr<kernels::Weight>>& out) {
  std::unique_ptr<kernels::Weight> whole;
  if (Status st = loader.load({{whole, name, shape}}); !st) return st;
  const gguf::TensorInfo* t = loader.file().find_tensor(name);
  if (t->type != DType::F32) {
    return make_error("{}: {} is {}, expected f32", loader.file().name(), name,
                      dtype_name(t->type));
  }
  const auto* values = reinterpret_cast<const float*>(t->data);
  const int64_t n = t->num_elements(), len = n / parts;
  out.clear();
  for (int64_t p = 0; p < parts; ++p) {
    const std::vector<float> part(values + p * len, values + (p + 1) * len);
    Result<std::unique_ptr<kernels::Weight>> w =
        loader.from_host(parts == 1 ? name : name + " (group " + std::to_string(p) + ")", part);
    if (!w) return w.error_value();
    out.push_back(std::move(*w));
  }
  return {};
}

Status GraniteHybridDecoder::load_mamba(WeightLoader& loader, int64_t il, Layer& L) const {
  const ModelConfig::RecurrentShape& r = c_.recurrent;
  const int64_t d = c_.n_embd, H = r.v_heads, G = r.k_heads;
  auto t = [&](const char* suffix) { return layer_tensor(il, suffix); };
  Status st = loader.load({{L.in, t("ssm_in.weight"), {d, inner() + xbc() + H}},
                           {L.conv, t("ssm_conv1d.weight"), {r.conv_kernel, xbc()}},
                           {L.conv_bias, t("ssm_conv1d.bias"), {xbc()}},
                           {L.dt_bias, t("ssm_dt.bias"), {H}},
                           {L.out, t("ssm_out.weight"), {inner(), d}}});
  if (st && L.conv->type() != DType::F32) {
    st = make_error("{}: {} is {}, expected f32", loader.file().name(), t("ssm_conv1d.weight"),
                    dtype_name(L.conv->type()));
  }
  std::vector<std::unique_ptr<kernels::Weight>> v;
  if (st) st = load_vectors(loader, t("ssm_a"), {1, H}, 1, v);
  if (st) L.a = std::move(v[0]);
  if (st) st = load_vectors(loader, t("ssm_d"), {1, H}, 1, v);
  if (st) L.d = std::move(v[0]);
  if (st) st = load_vectors(loader, t("ssm_norm.weight"), {inner() / G, G}, G, L.norm);
  return st;
}

Status GraniteHybridDecoder::load(WeightLoader& loader) {
  if (c_.shard.num_layers() != c_.n_layers) {
    return Error("granitehybrid: a split model is not supported");
  }
  Status st = embedding_.load(loader);
  if (st) st = head_.load(loader);
  if (st) st = attention_.load_rope(loader);
  layers_.resize(static_cast<size_t>(c_.n_layers));
  for (int64_t il = 0; st && il < c_.n_layers; ++il) {
    Layer& L = layers_[static_cast<size_t>(il)];
    st = loader.load({{L.attn_norm, layer_tensor(il, "attn_norm.weight"), {c_.n_embd}},
                      {L.ffn_norm, layer_tensor(il, "ffn_norm.weight"), {c_.n_embd}}});
    if (st) {
      st = c_.is_recurrent(il) ? load_mamba(loader, il, L)
                               : attention_.load(loader, il, L.attention);
    }
    if (st) st = ffn_.load(loader, il, L.ffn);
  }
  return st;
}

Status GraniteHybridDecoder::reserve(kernels::Backend& be, const StepCapacity& cap) {
  const int64_t n = cap.max_tokens;
  Status st;
  for (auto [m, cols] : {std::pair{&x_, c_.n_embd}, {&h_, c_.n_embd},
                         {&proj_, inner() + xbc() + c_.recurrent.v_heads}, {&conv_, xbc()},
                         {&y_, inner()}}) {
    if (st) st = m->reserve(be, n, cols);
  }
  if (st) st = attention_.reserve(be, cap);
  if (st) st = ffn_.reserve(be, cap);
  if (st) st = head_.reserve(be, cap);
  return st;
}

void GraniteHybridDecoder::forward(const ForwardContext& ctx) {
  kernels::Backend& be = ctx.backend;
  const int64_t n = ctx.inputs.n_tokens;
  const Matrix x = x_.rows(n), h = h_.rows(n);
  blocks::stage_input(ctx, c_, embedding_, x);
  for (int64_t il = 0; il < c_.n_layers; ++il) {
    const Layer& L = layers_[static_cast<size_t>(il)];
    be.rms_norm(x, *L.attn_norm, c_.rms_norm_eps, h);
    if (c_.is_recurrent(il)) {
      mamba(ctx, il, L, h);
    } else {
      attention_.forward(ctx, il, L.attention, h, h);
    }
    if (c_.residual_scale != 1.0f) be.scale(h, c_.residual_scale, h);
    be.add(x, h, x);
    be.rms_norm(x, *L.ffn_norm, c_.rms_norm_eps, h);
    ffn_.forward(ctx, il, L.ffn, h, x);  // adds residual_scale x its output into x
  }
  blocks::stage_output(ctx, c_, head_, embedding_, x);
}

void GraniteHybridDecoder::mamba(const ForwardContext& ctx, int64_t il, const Layer& L,
                                 Matrix h) {
  kernels::Backend& be = ctx.backend;
  const int64_t n = h.rows;
  const ModelConfig::RecurrentShape& r = c_.recurrent;
  const int64_t H = r.v_heads, G = r.k_heads, N = r.k_dim, I = inner(), gs = I / G;
  const Matrix proj = proj_.rows(n), conv = conv_.rows(n), y = y_.rows(n);
  be.matmul(*L.in, h, proj);
  const int64_t X = xbc();
  const Matrix z{proj.data, n, I, proj.stride}, xbc_in{proj.data + I, n, X, proj.stride};
  const Matrix dt{proj.data + I + X, n, H, proj.stride};
  const KvCache::RecurrentLayer& state = ctx.kv.recurrent(il);
  be.short_conv(xbc_in, *L.conv, L.conv_bias.get(), state.conv, ctx.inputs.recurrent, conv);
  const Matrix xs{conv.data, n, I, conv.stride}, B{conv.data + I, n, G * N, conv.stride};
  const Matrix C{conv.data + I + G * N, n, G * N, conv.stride};
  kernels::SsmScanParams p;
  p.n_heads = static_cast<int32_t>(H);
  p.n_groups = static_cast<int32_t>(G);
  p.head_dim = static_cast<int32_t>(r.v_dim);
  p.state_size = static_cast<int32_t>(N);
  p.a = L.a.get();
  p.d = L.d.get();
  p.dt_bias = L.dt_bias.get();
  be.ssm_scan(xs, B, C, dt, state.delta, ctx.inputs.recurrent, p, y);
  be.swiglu(z, y, y);  // silu(z) * y
  for (int64_t g = 0; g < G; ++g) {
    const Matrix part{y.data + g * gs, n, gs, y.stride};
    be.rms_norm(part, *L.norm[static_cast<size_t>(g)], c_.rms_norm_eps, part);
  }
  be.matmul(*L.out, y, h);
}

}  // namespace

extern const ArchitectureFamily granitehybrid_family{"granitehybrid", &configure,
                                                     &load_network<GraniteHybridDecoder>};

}  // namespace cadenza::model::arch
