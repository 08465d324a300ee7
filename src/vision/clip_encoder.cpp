#include "vision/clip_encoder.h"

#include <algorithm>
#include <cmath>

#include "gguf/gguf.h"
#include "model/host_ops.h"
#include "model/scratch.h"
#include "model/weight_loader.h"

namespace cadenza::vision {
namespace {

using kernels::Matrix;
using kernels::Weight;
using model::ScratchMatrix;

struct Norm {
  std::vector<float> w, b;
};

class ClipEncoder final : public VisionEncoder {
 public:
  ClipEncoder(std::shared_ptr<const gguf::GgufFile> file, kernels::Backend& backend, VisionConfig c)
      : file_(std::move(file)), backend_(backend), c_(c) {}
  Status load();
  const VisionConfig& config() const override { return c_; }
  Result<std::vector<float>> encode(const NormalizedImage& image) override;

 private:
  struct Layer {
    std::unique_ptr<Weight> wq, bq, wk, bk, wv, bv, wo, bo, wup, bup, wdown, bdown;
    Norm ln1, ln2;
  };
  Status load_norm(const std::string& prefix, Norm& norm);
  Status reserve();
  void to_host(Matrix m, std::vector<float>& h) {
    h.resize(static_cast<size_t>(m.rows * m.cols));
    backend_.read_view(m, h.data());
  }
  // t = norm(x), through the host.
  void norm_into(Matrix x, const Norm& n, Matrix t) {
    to_host(x, tmp_h_);
    model::layer_norm(tmp_h_, x.rows, x.cols, n.w, n.b, c_.norm_eps);
    backend_.write_view(tmp_h_.data(), t);
  }
  void linear(const Weight& w, const Weight* b, Matrix x, Matrix y) {
    backend_.matmul(w, x, y);
    if (b != nullptr) backend_.add_bias(y, *b, y);
  }

  std::shared_ptr<const gguf::GgufFile> file_;
  kernels::Backend& backend_;
  VisionConfig c_;
  Status load_projector(model::WeightLoader& loader);
  // The projector over the encoder's output rows `feats` ([n_patches][d]), into out_.
  void project(Matrix feats);

  std::unique_ptr<Weight> patch_w_, patch_b_, mm0_w_, mm0_b_, mm2_w_, mm2_b_;
  std::unique_ptr<Weight> input_proj_;  // gemma3: [n_out][d] (transposed from the file's [d][n_out])
  std::vector<float> soft_emb_norm_;    // gemma3: [d]
  std::vector<float> class_embd_, position_embd_;  // host: [d], [n_positions][d]
  Norm pre_ln_, post_ln_;
  std::vector<Layer> layers_;
  bool reserved_ = false;
  ScratchMatrix patches_, x_, t_, q_, k_, v_, a_, up_, proj_h_, pooled_, out_;
  std::vector<float> tmp_h_, q_h_, k_h_, v_h_, a_h_;
};

Status ClipEncoder::load_norm(const std::string& prefix, Norm& norm) {
  auto w = model::host_tensor(*file_, prefix + ".weight", c_.n_embd);
  if (!w) return w.error_value();
  auto b = model::host_tensor(*file_, prefix + ".bias", c_.n_embd);
  if (!b) return b.error_value();
  norm.w = std::move(*w);
  norm.b = std::move(*b);
  return {};
}

Status ClipEncoder::load() {
  const int64_t d = c_.n_embd, p = c_.patch_size, ff = c_.n_ff;
  // The patch kernel [p, p, 3, d] is, row by row, the [d][3 p p] matrix of the unfolded patches.
  auto patch = model::host_tensor(*file_, "v.patch_embd.weight", p, p * 3 * d);
  if (!patch) return patch.error_value();
  kernels::WeightDesc desc;
  desc.name = "v.patch_embd.weight";
  desc.type = DType::F32;
  desc.cols = 3 * p * p;
  desc.rows = d;
  desc.data = patch->data();
  auto pw = backend_.upload_weight(desc);
  if (!pw) return pw.error_value();
  patch_w_ = std::move(*pw);
  auto pos = model::host_tensor(*file_, "v.position_embd.weight", d, c_.n_positions);
  if (!pos) return pos.error_value();
  position_embd_ = std::move(*pos);
  if (c_.has_class_embd) {
    auto cls = model::host_tensor(*file_, "v.class_embd", d);
    if (!cls) return cls.error_value();
    class_embd_ = std::move(*cls);
  }
  Status st;
  if (c_.has_pre_ln) st = load_norm("v.pre_ln", pre_ln_);
  if (st && c_.has_post_ln) st = load_norm("v.post_ln", post_ln_);
  if (!st) return st;
  model::WeightLoader loader(file_, backend_);
  st = loader.load({{patch_b_, "v.patch_embd.bias", {d}, model::required_if(c_.has_patch_bias)}});
  if (st) st = load_projector(loader);
  layers_.resize(static_cast<size_t>(c_.n_layers));
  for (int64_t il = 0; st && il < c_.n_layers; ++il) {
    Layer& L = layers_[static_cast<size_t>(il)];
    const std::string pre = "v.blk." + std::to_string(il) + ".";
    st = loader.load({
        {L.wq, pre + "attn_q.weight", {d, d}},       {L.bq, pre + "attn_q.bias", {d}},
        {L.wk, pre + "attn_k.weight", {d, d}},       {L.bk, pre + "attn_k.bias", {d}},
        {L.wv, pre + "attn_v.weight", {d, d}},       {L.bv, pre + "attn_v.bias", {d}},
        {L.wo, pre + "attn_out.weight", {d, d}},     {L.bo, pre + "attn_out.bias", {d}},
        {L.wup, pre + "ffn_up.weight", {d, ff}},     {L.bup, pre + "ffn_up.bias", {ff}},
        {L.wdown, pre + "ffn_down.weight", {ff, d}}, {L.bdown, pre + "ffn_down.bias", {d}},
    });
    if (st) st = load_norm(pre + "ln1", L.ln1);
    if (st) st = load_norm(pre + "ln2", L.ln2);
  }
  return st;
}

Status ClipEncoder::load_projector(model::WeightLoader& loader) {
  const int64_t d = c_.n_embd;
  switch (c_.projector) {
    case ProjectorType::kMlp:
      return loader.load({
          {mm0_w_, "mm.0.weight", {d, c_.proj_hidden}}, {mm0_b_, "mm.0.bias", {c_.proj_hidden}},
          {mm2_w_, "mm.2.weight", {c_.proj_hidden, c_.n_out}}, {mm2_b_, "mm.2.bias", {c_.n_out}},
      });
    case ProjectorType::kGemma3: {
      auto norm = model::host_tensor(*file_, "mm.soft_emb_norm.weight", d);
      if (!norm) return norm.error_value();
      soft_emb_norm_ = std::move(*norm);
      // The file holds HF's [d][n_out] parameter (y = x W); the backend multiplies by [out][in].
      auto w = model::host_tensor(*file_, "mm.input_projection.weight", c_.n_out, d);
      if (!w) return w.error_value();
      std::vector<float> wt(w->size());
      for (int64_t i = 0; i < d; ++i)
        for (int64_t o = 0; o < c_.n_out; ++o) wt[static_cast<size_t>(o * d + i)] = (*w)[static_cast<size_t>(i * c_.n_out + o)];
      kernels::WeightDesc desc;
      desc.name = "mm.input_projection.weight";
      desc.type = DType::F32;
      desc.cols = d;
      desc.rows = c_.n_out;
      desc.data = wt.data();
      auto up = backend_.upload_weight(desc);
      if (!up) return up.error_value();
      input_proj_ = std::move(*up);
      return {};
    }
  }
  return Error("vision encoder: unknown projector");
}

Status ClipEncoder::reserve() {
  if (reserved_) return {};
  const int64_t n = c_.n_positions, d = c_.n_embd;
  Status st = patches_.reserve(backend_, c_.n_patches, 3 * c_.patch_size * c_.patch_size);
  for (ScratchMatrix* m : {&x_, &t_, &q_, &k_, &v_, &a_})
    if (st) st = m->reserve(backend_, n, d);
  if (st) st = up_.reserve(backend_, n, c_.n_ff);
  if (st && c_.projector == ProjectorType::kMlp) st = proj_h_.reserve(backend_, c_.n_patches, c_.proj_hidden);
  if (st && c_.projector == ProjectorType::kGemma3) st = pooled_.reserve(backend_, c_.n_image_tokens, d);
  if (st) st = out_.reserve(backend_, c_.n_image_tokens, c_.n_out);
  if (!st) return make_error("vision encoder: scratch: {}", st.error());
  reserved_ = true;
  return {};
}

void activate(std::vector<float>& x, Activation a) {
  if (a == Activation::kGelu) model::gelu_tanh(x);
  else model::gelu_quick(x);
}

Result<std::vector<float>> ClipEncoder::encode(const NormalizedImage& image) {
  if (image.width != c_.image_size || image.height != c_.image_size)
    return make_error("vision encoder: input is {}x{}, the encoder takes {}x{}", image.width,
                      image.height, c_.image_size, c_.image_size);
  if (Status st = reserve(); !st) return st.error_value();
  const int64_t n = c_.n_positions, d = c_.n_embd, p = c_.patch_size, P = c_.n_patches;
  const int64_t side = c_.image_size / p, k = 3 * p * p;
  kernels::Backend& be = backend_;
  // Unfold: patch (py, px) -> row py * side + px, element (c, y, x) -> c p p + y p + x.
  tmp_h_.assign(static_cast<size_t>(P * k), 0.0f);
  for (int64_t py = 0; py < side; ++py)
    for (int64_t px = 0; px < side; ++px) {
      float* row = tmp_h_.data() + (py * side + px) * k;
      for (int c = 0; c < 3; ++c)
        for (int64_t y = 0; y < p; ++y)
          for (int64_t x = 0; x < p; ++x)
            row[(c * p + y) * p + x] = image.at(c, static_cast<int>(py * p + y), static_cast<int>(px * p + x));
    }
  const Matrix patches = patches_.rows(P), x = x_.rows(n), t = t_.rows(n), q = q_.rows(n),
               kk = k_.rows(n), v = v_.rows(n), a = a_.rows(n), up = up_.rows(n);
  be.write_view(tmp_h_.data(), patches);
  // Rows: the patches, then the class embedding (where the reference engine puts it; see the
  // header). Positions follow the row order.
  linear(*patch_w_, patch_b_.get(), patches, x.row_range(0, P));
  to_host(x, tmp_h_);
  if (c_.has_class_embd) std::copy(class_embd_.begin(), class_embd_.end(), tmp_h_.begin() + P * d);
  for (size_t i = 0; i < tmp_h_.size(); ++i) tmp_h_[i] += position_embd_[i];
  if (c_.has_pre_ln) model::layer_norm(tmp_h_, n, d, pre_ln_.w, pre_ln_.b, c_.norm_eps);
  be.write_view(tmp_h_.data(), x);
  const std::vector<int64_t> starts = {0}, lengths = {n};
  for (int64_t il = 0; il < c_.n_layers_used; ++il) {
    const Layer& L = layers_[static_cast<size_t>(il)];
    norm_into(x, L.ln1, t);
    linear(*L.wq, L.bq.get(), t, q);
    linear(*L.wk, L.bk.get(), t, kk);
    linear(*L.wv, L.bv.get(), t, v);
    to_host(q, q_h_);
    to_host(kk, k_h_);
    to_host(v, v_h_);
    a_h_.resize(q_h_.size());
    model::bidirectional_attention(q_h_.data(), k_h_.data(), v_h_.data(), a_h_.data(), d,
                                   c_.n_heads, starts, lengths);
    be.write_view(a_h_.data(), a);
    linear(*L.wo, L.bo.get(), a, t);
    be.add(x, t, x);
    norm_into(x, L.ln2, t);
    linear(*L.wup, L.bup.get(), t, up);
    to_host(up, tmp_h_);
    activate(tmp_h_, c_.activation);
    be.write_view(tmp_h_.data(), up);
    linear(*L.wdown, L.bdown.get(), up, t);
    be.add(x, t, x);
  }
  if (c_.has_post_ln) norm_into(x, post_ln_, x);
  // The output rows: all but the first (with a class embedding: patches 1.. and the class row).
  project(x.row_range(c_.has_class_embd ? 1 : 0, P));
  std::vector<float> result;
  to_host(out_.rows(c_.n_image_tokens), result);
  return result;
}

void ClipEncoder::project(Matrix feats) {
  kernels::Backend& be = backend_;
  const int64_t P = c_.n_patches, T = c_.n_image_tokens, d = c_.n_embd;
  const Matrix out = out_.rows(T);
  if (c_.projector == ProjectorType::kMlp) {
    const Matrix h = proj_h_.rows(P);
    linear(*mm0_w_, mm0_b_.get(), feats, h);
    to_host(h, tmp_h_);
    model::gelu_tanh(tmp_h_);
    be.write_view(tmp_h_.data(), h);
    linear(*mm2_w_, mm2_b_.get(), h, out);
    return;
  }
  // gemma3: the side x side patch grid (row-major) averaged over pool x pool squares, row-major,
  // then an RMS norm scaled by soft_emb_norm, then the input projection.
  to_host(feats, tmp_h_);
  const int64_t side = c_.image_size / c_.patch_size, k = c_.pool, out_side = side / k;
  a_h_.assign(static_cast<size_t>(T * d), 0.0f);
  const float inv = 1.0f / static_cast<float>(k * k);
  for (int64_t oy = 0; oy < out_side; ++oy)
    for (int64_t ox = 0; ox < out_side; ++ox) {
      float* dst = a_h_.data() + (oy * out_side + ox) * d;
      for (int64_t y = oy * k; y < oy * k + k; ++y)
        for (int64_t xx = ox * k; xx < ox * k + k; ++xx) {
          const float* src = tmp_h_.data() + (y * side + xx) * d;
          for (int64_t i = 0; i < d; ++i) dst[i] += src[i];
        }
      for (int64_t i = 0; i < d; ++i) dst[i] *= inv;
    }
  for (int64_t r = 0; r < T; ++r) {
    float* row = a_h_.data() + r * d;
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(row[i]) * row[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + c_.norm_eps));
    for (int64_t i = 0; i < d; ++i) row[i] = row[i] * scale * soft_emb_norm_[static_cast<size_t>(i)];
  }
  const Matrix pooled = pooled_.rows(T);
  be.write_view(a_h_.data(), pooled);
  be.matmul(*input_proj_, pooled, out);
}

}  // namespace

NormalizedImage VisionEncoder::preprocess(const Image& image) const {
  const VisionConfig& c = config();
  const int s = static_cast<int>(c.image_size);
  // LLaVA pads with the mean colour after a bilinear fit; for Gemma 3 the reference engine pads
  // with black, and a bicubic fit comes closer to it than a bilinear one (measured: 0.118 against
  // 0.123 max |err| on a 48 x 40 picture; stretching to the square, as HF's processor does, is
  // 0.37 off; tests/vision/gemma3_golden_test.cpp).
  const bool gemma3 = c.projector == ProjectorType::kGemma3;
  std::array<uint8_t, 3> fill{0, 0, 0};
  for (int i = 0; i < 3 && !gemma3; ++i)
    fill[static_cast<size_t>(i)] = static_cast<uint8_t>(std::clamp(std::lround(c.image_mean[static_cast<size_t>(i)] * 255.0f), 0L, 255L));
  const double scale = std::min(static_cast<double>(s) / image.width, static_cast<double>(s) / image.height);
  const int w = std::clamp(static_cast<int>(std::lround(image.width * scale)), 1, s);
  const int h = std::clamp(static_cast<int>(std::lround(image.height * scale)), 1, s);
  const Image fitted = resize(image, w, h, gemma3 ? ResizeFilter::kBicubic : ResizeFilter::kBilinear);
  return normalize(center_crop(fitted, s, s, fill), c.image_mean, c.image_std);
}

Result<std::unique_ptr<VisionEncoder>> VisionEncoder::load(std::shared_ptr<const gguf::GgufFile> file,
                                                           kernels::Backend& backend) {
  auto config = read_vision_config(*file);
  if (!config) return config.error_value();
  auto enc = std::make_unique<ClipEncoder>(file, backend, *config);
  if (Status st = enc->load(); !st) return st.error_value();
  return std::unique_ptr<VisionEncoder>(std::move(enc));
}

Result<std::unique_ptr<VisionEncoder>> VisionEncoder::open(const std::string& path,
                                                           kernels::Backend& backend) {
  auto file = gguf::GgufFile::open(path);
  if (!file) return file.error_value();
  return load(std::shared_ptr<const gguf::GgufFile>(std::move(*file)), backend);
}

}  // namespace cadenza::vision
