// qwen35: Qwen3.5's hybrid decoder (general.architecture "qwen35") with a dense SwiGLU FFN, and
// the network it shares with qwen35moe (qwen35.h has the layer diagram).
#include "model/arch/qwen35.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "model/config.h"
#include "model/metadata.h"
#include "model/registry.h"
#include "model/weight_loader.h"

namespace cadenza::model::arch {

using kernels::Matrix;

Status configure_qwen35_layers(const MetadataReader& md, ModelConfig& c) {
  c.rope_layout = kernels::RopeLayout::NeoX;
  c.qk_norm = true;
  Result<int64_t> v = md.count("full_attention_interval", 1, limits::kMaxLayers);
  if (!v) return v.error_value();
  const int64_t interval = *v;
  if (Status st = read_recurrent_shape(md, c); !st) return st;
  c.recurrent_layers.resize(static_cast<size_t>(c.n_layers));
  for (int64_t il = 0; il < c.n_layers; ++il) {
    c.recurrent_layers[static_cast<size_t>(il)] = (il + 1) % interval != 0;
  }
  return {};
}

Qwen35Decoder::Qwen35Decoder(const ModelConfig& c)
    : c_(c), embedding_(c), ffn_(c, c.n_ff), experts_(c), shared_(c), head_(c) {}

Status Qwen35Decoder::load(WeightLoader& loader) {
  if (c_.shard.num_layers() != c_.n_layers) {
    return Error("qwen35: a split model is not supported");
  }
  Status st = embedding_.load(loader);
  if (st) st = head_.load(loader);
  layers_.resize(static_cast<size_t>(c_.n_layers));
  const int64_t d = c_.n_embd, hd = c_.head_dim_k;
  const int64_t q_dim = c_.n_heads * hd, kv_dim = c_.n_kv_heads * hd;
  const ModelConfig::RecurrentShape& r = c_.recurrent;
  const int64_t v_width = r.v_heads * r.v_dim;
  for (int64_t il = 0; st && il < c_.n_layers; ++il) {
    Layer& L = layers_[static_cast<size_t>(il)];
    auto t = [&](const char* suffix) { return layer_tensor(il, suffix); };
    st = loader.load({{L.attn_norm, t("attn_norm.weight"), {d}},
                      {L.ffn_norm, t("post_attention_norm.weight"), {d}}});
    if (st && c_.is_recurrent(il)) {
      st = loader.load({{L.wqkv, t("attn_qkv.weight"), {d, r.conv_channels()}},
                        {L.wz, t("attn_gate.weight"), {d, v_width}},
                        {L.wbeta, t("ssm_beta.weight"), {d, r.v_heads}},
                        {L.walpha, t("ssm_alpha.weight"), {d, r.v_heads}},
                        {L.conv, t("ssm_conv1d.weight"), {r.conv_kernel, r.conv_channels()}},
                        {L.dt_bias, t("ssm_dt.bias"), {r.v_heads}},
                        {L.a, t("ssm_a"), {r.v_heads}},
                        {L.ssm_norm, t("ssm_norm.weight"), {r.v_dim}},
                        {L.wo, t("ssm_out.weight"), {v_width, d}}});
      if (st && L.conv->type() != DType::F32) {
        st = make_error("{}: {} is {}, expected f32", loader.file().name(),
                        t("ssm_conv1d.weight"), dtype_name(L.conv->type()));
      }
    } else if (st) {
      st = loader.load({{L.wq, t("attn_q.weight"), {d, 2 * q_dim}},
                        {L.wk, t("attn_k.weight"), {d, kv_dim}},
                        {L.wv, t("attn_v.weight"), {d, kv_dim}},
                        {L.q_norm, t("attn_q_norm.weight"), {hd}},
                        {L.k_norm, t("attn_k_norm.weight"), {hd}},
                        {L.wo, t("attn_output.weight"), {q_dim, d}}});
    }
    if (st && !moe()) st = ffn_.load(loader, il, L.ffn);
    if (st && moe()) st = experts_.load(loader, il, L.experts);
    if (st && has_shared()) st = shared_.load(loader, il, L.shared);
  }
  return st;
}

Status Qwen35Decoder::reserve(kernels::Backend& be, const StepCapacity& cap) {
  const int64_t n = cap.max_tokens, hd = c_.head_dim_k;
  const ModelConfig::RecurrentShape& r = c_.recurrent;
  const int64_t v_width = r.v_heads * r.v_dim;
  Status st;
  for (auto [m, cols] : {std::pair{&x_, c_.n_embd}, {&h_, c_.n_embd},
                         {&qg_, std::max(2 * c_.n_heads * hd, r.conv_channels())},
                         {&q_, std::max(c_.n_heads * hd, r.conv_channels())},
                         {&gate_, std::max(c_.n_heads * hd, v_width)},
                         {&k_, c_.n_kv_heads * hd}, {&v_, c_.n_kv_heads * hd},
                         {&out_, std::max(c_.n_heads * hd, v_width)},
                         {&alpha_, r.v_heads}, {&beta_, r.v_heads}}) {
    if (st) st = m->reserve(be, n, std::max<int64_t>(cols, 1));
  }
  if (st && !moe()) st = ffn_.reserve(be, cap);
  if (st && moe()) st = experts_.reserve(be, cap);
  if (st && has_shared()) st = shared_.reserve(be, cap);
  if (st && has_shared()) st = shared_out_.reserve(be, n, c_.n_embd);
  if (st) st = head_.reserve(be, cap);
  return st;
}

void Qwen35Decoder::forward(const ForwardContext& ctx) {
  kernels::Backend& be = ctx.backend;
  const int64_t n = ctx.inputs.n_tokens;
  const Matrix x = x_.rows(n), h = h_.rows(n);
  blocks::stage_input(ctx, c_, embedding_, x);
  for (int64_t il = 0; il < c_.n_layers; ++il) {
    const Layer& L = layers_[static_cast<size_t>(il)];
    be.rms_norm(x, *L.attn_norm, c_.rms_norm_eps, h);
    if (c_.is_recurrent(il)) {
      linear_attention(ctx, il, L, h);
    } else {
      gated_attention(ctx, il, L, h);
    }
    be.add(x, h, x);
    be.rms_norm(x, *L.ffn_norm, c_.rms_norm_eps, h);
    feed_forward(ctx, il, L, h, x);
  }
  blocks::stage_output(ctx, c_, head_, embedding_, x);
}

void Qwen35Decoder::feed_forward(const ForwardContext& ctx, int64_t il, const Layer& L, Matrix h,
                                 Matrix x) {
  kernels::Backend& be = ctx.backend;
  if (!moe()) {
    ffn_.forward(ctx, L.ffn, h, h);
    be.add(x, h, x);
    return;
  }
  // The shared expert reads h before the routed experts overwrite it (as qwen2moe).
  const Matrix shared = has_shared() ? shared_out_.rows(h.rows) : Matrix{};
  if (has_shared()) shared_.forward(ctx, L.shared, h, shared);
  experts_.forward(ctx, il, L.experts, h, h);
  if (has_shared()) be.add(x, shared, x);
  be.add(x, h, x);
}

void Qwen35Decoder::linear_attention(const ForwardContext& ctx, int64_t il, const Layer& L,
                                     Matrix h) {
  kernels::Backend& be = ctx.backend;
  const int64_t n = h.rows;
  const ModelConfig::RecurrentShape& r = c_.recurrent;
  const int64_t kw = r.k_heads * r.k_dim, vw = r.v_heads * r.v_dim, C = r.conv_channels();
  const Matrix qkv = qg_.shaped(n, C), conv = q_.shaped(n, C), z = gate_.shaped(n, vw);
  const Matrix alpha = alpha_.rows(n), beta = beta_.rows(n), o = out_.shaped(n, vw);
  be.matmul(*L.wqkv, h, qkv);
  be.matmul(*L.wz, h, z);
  be.matmul(*L.wbeta, h, beta);
  be.matmul(*L.walpha, h, alpha);
  const KvCache::RecurrentLayer& state = ctx.kv.recurrent(il);
  be.short_conv(qkv, *L.conv, nullptr, state.conv, ctx.inputs.recurrent, conv);
  kernels::DeltaRuleParams p;
  p.n_k_heads = static_cast<int32_t>(r.k_heads);
  p.n_v_heads = static_cast<int32_t>(r.v_heads);
  p.dk = static_cast<int32_t>(r.k_dim);
  p.dv = static_cast<int32_t>(r.v_dim);
  p.a = L.a.get();
  p.dt_bias = L.dt_bias.get();
  p.l2_eps = c_.rms_norm_eps;
  const Matrix q{conv.data, n, kw, conv.stride}, k{conv.data + kw, n, kw, conv.stride};
  const Matrix v{conv.data + 2 * kw, n, vw, conv.stride};
  be.gated_delta_rule(q, k, v, alpha, beta, state.delta, ctx.inputs.recurrent, p, o);
  const Matrix o_heads = o.reshaped(n * r.v_heads, r.v_dim);
  be.rms_norm(o_heads, *L.ssm_norm, c_.rms_norm_eps, o_heads);
  be.swiglu(z, o, o);  // silu(z) * o
  be.matmul(*L.wo, o, h);
}

void Qwen35Decoder::gated_attention(const ForwardContext& ctx, int64_t il, const Layer& L,
                                    Matrix h) {
  kernels::Backend& be = ctx.backend;
  const int64_t n = h.rows, hd = c_.head_dim_k, H = c_.n_heads, Hkv = c_.n_kv_heads;
  const Matrix qg = qg_.shaped(n, 2 * H * hd), q = q_.shaped(n, H * hd);
  const Matrix gate = gate_.shaped(n, H * hd), k = k_.rows(n), v = v_.rows(n);
  const Matrix out = out_.shaped(n, H * hd);
  be.matmul(*L.wq, h, qg);
  // Per head [query | gate]: split into two [n*H][hd] views.
  const Matrix qg_heads = qg.reshaped(n * H, 2 * hd);
  be.copy_matrix({qg_heads.data, n * H, hd, 2 * hd}, q.reshaped(n * H, hd));
  be.copy_matrix({qg_heads.data + hd, n * H, hd, 2 * hd}, gate.reshaped(n * H, hd));
  be.matmul(*L.wk, h, k);
  be.matmul(*L.wv, h, v);
  be.rms_norm(q.reshaped(n * H, hd), *L.q_norm, c_.rms_norm_eps, q.reshaped(n * H, hd));
  be.rms_norm(k.reshaped(n * Hkv, hd), *L.k_norm, c_.rms_norm_eps, k.reshaped(n * Hkv, hd));
  const kernels::RopeParams rope = c_.rope_params(il);
  be.rope(q, static_cast<int32_t>(H), static_cast<int32_t>(hd), ctx.inputs.attention.positions,
          rope);
  be.rope(k, static_cast<int32_t>(Hkv), static_cast<int32_t>(hd),
          ctx.inputs.attention.positions, rope);
  const kernels::KvLayer& kv = ctx.kv.layer(il);
  be.kv_write(kv, k, v, ctx.inputs.slots);
  kernels::AttentionParams params;
  params.scale = c_.attention_scale();
  be.attention(q, kv, ctx.inputs.attention, static_cast<int32_t>(H), params, out);
  be.sigmoid(gate, gate);
  be.mul(out, gate, out);
  be.matmul(*L.wo, out, h);
}

namespace {

Status configure(const MetadataReader& md, ModelConfig& c) {
  if (Status st = configure_qwen35_layers(md, c); !st) return st;
  return read_feed_forward(md, c, {.experts = FeedForwardKeys::Experts::None});
}

}  // namespace

extern const ArchitectureFamily qwen35_family{"qwen35", &configure, &load_network<Qwen35Decoder>};

}  // namespace cadenza::model::arch
