// The CLIP vision encoder + LLaVA MLP projector against a plain double-precision forward pass
// written here from the architecture's definition (direct 2-D convolution for the patch
// embedding, per-head attention loops), on a synthesized mmproj; metadata and shape errors.
#include "vision/clip_encoder.h"

#include <cmath>
#include <fstream>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "image_encode.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/host_ops.h"
#include "synth/mmproj.h"
#include "temp_dir.h"

namespace cadenza::vision {
namespace {

using Mat = std::vector<double>;  // row-major

struct Ref {
  const gguf::GgufFile& f;
  std::vector<double> get(const std::string& name, int64_t cols, int64_t rows = 1) const {
    auto t = model::host_tensor(f, name, cols, rows);
    EXPECT_TRUE(t.ok()) << name;
    return t.ok() ? std::vector<double>(t->begin(), t->end()) : std::vector<double>(cols * rows);
  }
};

// y[n][out] = x[n][in] W[out][in]^T + b
Mat linear(const Mat& x, int64_t n, int64_t in, const Mat& w, const Mat& b, int64_t out) {
  Mat y(static_cast<size_t>(n * out));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b[static_cast<size_t>(o)];
      for (int64_t i = 0; i < in; ++i) acc += x[static_cast<size_t>(r * in + i)] * w[static_cast<size_t>(o * in + i)];
      y[static_cast<size_t>(r * out + o)] = acc;
    }
  return y;
}

Mat norm(const Mat& x, int64_t n, int64_t d, const Mat& w, const Mat& b, double eps) {
  Mat y(x.size());
  for (int64_t r = 0; r < n; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += x[static_cast<size_t>(r * d + i)];
    mean /= d;
    for (int64_t i = 0; i < d; ++i) var += std::pow(x[static_cast<size_t>(r * d + i)] - mean, 2);
    var /= d;
    for (int64_t i = 0; i < d; ++i)
      y[static_cast<size_t>(r * d + i)] = (x[static_cast<size_t>(r * d + i)] - mean) / std::sqrt(var + eps) * w[static_cast<size_t>(i)] + b[static_cast<size_t>(i)];
  }
  return y;
}

double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double gelu_quick(double x) { return x / (1 + std::exp(-1.702 * x)); }

// The encoder's definition, independently of src/vision.
Mat reference_encode(const gguf::GgufFile& f, const VisionConfig& c, const NormalizedImage& img) {
  Ref R{f};
  const int64_t d = c.n_embd, p = c.patch_size, side = c.image_size / p, P = side * side;
  const int64_t n = P + 1, ff = c.n_ff, hd = d / c.n_heads;
  // Patch embedding as a strided convolution: kernel element (x, y, ch, o) in ggml order.
  Mat kernel = R.get("v.patch_embd.weight", p, p * 3 * d);
  // Rows: the patches, then the class embedding (the reference engine's layout, clip_encoder.h).
  Mat x(static_cast<size_t>(n * d));
  Mat cls = R.get("v.class_embd", d);
  for (int64_t i = 0; i < d; ++i) x[static_cast<size_t>(P * d + i)] = cls[static_cast<size_t>(i)];
  for (int64_t py = 0; py < side; ++py)
    for (int64_t px = 0; px < side; ++px)
      for (int64_t o = 0; o < d; ++o) {
        double acc = 0;
        for (int ch = 0; ch < 3; ++ch)
          for (int64_t ky = 0; ky < p; ++ky)
            for (int64_t kx = 0; kx < p; ++kx)
              acc += kernel[static_cast<size_t>(((o * 3 + ch) * p + ky) * p + kx)] *
                     img.at(ch, static_cast<int>(py * p + ky), static_cast<int>(px * p + kx));
        x[static_cast<size_t>((py * side + px) * d + o)] = acc;
      }
  Mat pos = R.get("v.position_embd.weight", d, n);
  for (size_t i = 0; i < x.size(); ++i) x[i] += pos[i];
  x = norm(x, n, d, R.get("v.pre_ln.weight", d), R.get("v.pre_ln.bias", d), c.norm_eps);
  for (int64_t il = 0; il + 1 < c.n_layers; ++il) {  // LLaVA: all but the last layer
    const std::string pre = "v.blk." + std::to_string(il) + ".";
    auto lin = [&](const Mat& in, const char* name, int64_t cin, int64_t cout) {
      return linear(in, n, cin, R.get(pre + name + ".weight", cin, cout), R.get(pre + name + ".bias", cout), cout);
    };
    Mat h = norm(x, n, d, R.get(pre + "ln1.weight", d), R.get(pre + "ln1.bias", d), c.norm_eps);
    Mat q = lin(h, "attn_q", d, d), k = lin(h, "attn_k", d, d), v = lin(h, "attn_v", d, d);
    Mat a(static_cast<size_t>(n * d), 0.0);
    for (int64_t head = 0; head < c.n_heads; ++head)
      for (int64_t i = 0; i < n; ++i) {
        std::vector<double> s(static_cast<size_t>(n));
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < hd; ++e) dot += q[static_cast<size_t>(i * d + head * hd + e)] * k[static_cast<size_t>(j * d + head * hd + e)];
          s[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t j = 0; j < n; ++j)
          for (int64_t e = 0; e < hd; ++e)
            a[static_cast<size_t>(i * d + head * hd + e)] += s[static_cast<size_t>(j)] / sum * v[static_cast<size_t>(j * d + head * hd + e)];
      }
    Mat o = lin(a, "attn_out", d, d);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    h = norm(x, n, d, R.get(pre + "ln2.weight", d), R.get(pre + "ln2.bias", d), c.norm_eps);
    Mat up = lin(h, "ffn_up", d, ff);
    for (double& e : up) e = c.activation == Activation::kGelu ? gelu_tanh(e) : gelu_quick(e);
    Mat down = lin(up, "ffn_down", ff, d);
    for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
  }
  Mat feats(x.begin() + d, x.end());  // without the first row
  Mat h = linear(feats, P, d, R.get("mm.0.weight", d, c.proj_hidden), R.get("mm.0.bias", c.proj_hidden), c.proj_hidden);
  for (double& e : h) e = gelu_tanh(e);
  return linear(h, P, c.proj_hidden, R.get("mm.2.weight", c.proj_hidden, c.n_out), R.get("mm.2.bias", c.n_out), c.n_out);
}

class ClipEncoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("mmproj.gguf");
    const synth::MmprojShape* shape = synth::find_mmproj_preset("clip-tiny");
    ASSERT_NE(shape, nullptr);
    ASSERT_TRUE(synth::write_synthetic_mmproj(*shape, 7, path_).ok());
  }
  cadenza::test::TempDir dir_;
  std::string path_;
};

TEST_F(ClipEncoderTest, ConfigComesFromTheFile) {
  auto file = gguf::GgufFile::open(path_);
  ASSERT_TRUE(file.ok());
  auto c = read_vision_config(**file);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->image_size, 32);
  EXPECT_EQ(c->patch_size, 8);
  EXPECT_EQ(c->n_patches, 16);
  EXPECT_EQ(c->n_positions, 17);
  EXPECT_EQ(c->n_layers, 2);
  EXPECT_EQ(c->n_layers_used, 1);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->n_out, 64);
  EXPECT_TRUE(c->has_class_embd);
  EXPECT_TRUE(c->has_pre_ln);
  EXPECT_FALSE(c->has_post_ln);
  EXPECT_EQ(c->activation, Activation::kGeluQuick);
  EXPECT_FLOAT_EQ(c->image_std[2], 0.27577711f);
}

// Gemma 3: every layer run, no class embedding, the pool from scale_factor (absent: 4), the
// image's tokens, the text around them and their attention from the projector.
TEST_F(ClipEncoderTest, Gemma3ConfigComesFromTheFile) {
  for (int64_t pool : {4, 2}) {
    synth::MmprojShape shape = *synth::find_mmproj_preset("gemma3-tiny");
    shape.pool = pool;
    const std::string path = dir_.file("gemma3-" + std::to_string(pool) + ".gguf");
    ASSERT_TRUE(synth::write_synthetic_mmproj(shape, 3, path).ok());
    auto file = gguf::GgufFile::open(path);
    ASSERT_TRUE(file.ok());
    EXPECT_EQ((*file)->find_tensor("v.class_embd"), nullptr);
    auto c = read_vision_config(**file);
    ASSERT_TRUE(c.ok()) << c.error();
    EXPECT_EQ(c->projector, ProjectorType::kGemma3);
    EXPECT_EQ(c->n_patches, 256);
    EXPECT_EQ(c->n_positions, 256);
    EXPECT_EQ(c->n_layers_used, 2);
    EXPECT_EQ(c->pool, pool);
    EXPECT_EQ(c->n_image_tokens, (16 / pool) * (16 / pool));
    EXPECT_EQ(c->n_out, 64);
    EXPECT_TRUE(c->has_post_ln && c->has_patch_bias && !c->has_pre_ln);
    EXPECT_EQ(c->activation, Activation::kGelu);
    EXPECT_EQ(c->image_begin, "<start_of_image>");
    EXPECT_EQ(c->image_end, "<end_of_image>");
    EXPECT_TRUE(c->bidirectional_image);
    auto backend = kernels::make_cpu_backend({.n_threads = 1});
    auto enc = VisionEncoder::open(path, *backend);
    ASSERT_TRUE(enc.ok()) << enc.error();
    auto out = (*enc)->encode((*enc)->preprocess(testing::make_test_image(30, 50)));
    ASSERT_TRUE(out.ok()) << out.error();
    EXPECT_EQ(out->size(), static_cast<size_t>(c->n_image_tokens * 64));
  }
}

TEST_F(ClipEncoderTest, MatchesAPlainReferenceForwardPass) {
  auto backend = kernels::make_cpu_backend({.n_threads = 2});
  auto enc = VisionEncoder::open(path_, *backend);
  ASSERT_TRUE(enc.ok()) << enc.error();
  auto file = gguf::GgufFile::open(path_);
  ASSERT_TRUE(file.ok());
  // A non-square picture: preprocessing resizes and pads it to 32 x 32.
  NormalizedImage img = (*enc)->preprocess(testing::make_test_image(48, 40));
  ASSERT_EQ(img.width, 32);
  auto out = (*enc)->encode(img);
  ASSERT_TRUE(out.ok()) << out.error();
  const VisionConfig& c = (*enc)->config();
  ASSERT_EQ(out->size(), static_cast<size_t>(c.n_patches * c.n_out));
  Mat ref = reference_encode(**file, c, img);
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_err = std::max(max_err, std::abs((*out)[i] - ref[i]));
    max_ref = std::max(max_ref, std::abs(ref[i]));
  }
  std::fprintf(stderr, "clip-tiny vs f64 reference: max |err| %.3g, max |ref| %.3g\n", max_err, max_ref);
  // f32 activations against f64: measured 6.7e-7 with max |ref| 3.16 (2e-7 relative).
  EXPECT_LT(max_err, 1e-4 * max_ref) << "max |err| " << max_err << " of max |ref| " << max_ref;
  EXPECT_GT(max_ref, 0.1);  // not a degenerate all-zero output
  // Deterministic, and a different image gives different embeddings.
  auto again = (*enc)->encode(img);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *out);
  auto other = (*enc)->encode((*enc)->preprocess(testing::make_test_image(32, 32, 2)));
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, *out);
}

TEST_F(ClipEncoderTest, RejectsAWrongInputSize) {
  auto backend = kernels::make_cpu_backend({.n_threads = 1});
  auto enc = VisionEncoder::open(path_, *backend);
  ASSERT_TRUE(enc.ok()) << enc.error();
  NormalizedImage img = normalize(testing::make_test_image(16, 32), {0, 0, 0}, {1, 1, 1});
  auto out = (*enc)->encode(img);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().find("32x32"), std::string::npos) << out.error();
}

TEST_F(ClipEncoderTest, SynthIsDeterministicPerSeed) {
  const synth::MmprojShape* shape = synth::find_mmproj_preset("clip-tiny");
  std::string a = dir_.file("a.gguf"), b = dir_.file("b.gguf");
  ASSERT_TRUE(synth::write_synthetic_mmproj(*shape, 7, a).ok());
  ASSERT_TRUE(synth::write_synthetic_mmproj(*shape, 8, b).ok());
  auto slurp = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(slurp(a), slurp(path_));
  EXPECT_NE(slurp(b), slurp(path_));
}

// Files that are not what the encoder reads: each a clear error naming the problem.
TEST(ClipEncoderErrors, MetadataProblemsAreNamed) {
  using gguf::Value;
  auto config_error = [](gguf::GgufWriter& w) {
    std::vector<uint8_t> bytes = w.to_bytes();
    auto f = gguf::GgufFile::parse(bytes, "x.gguf");
    EXPECT_TRUE(f.ok());
    auto c = read_vision_config(**f);
    EXPECT_FALSE(c.ok());
    return c.ok() ? std::string() : c.error();
  };
  gguf::GgufWriter w;
  w.set("general.architecture", Value::string("llama"));
  EXPECT_NE(config_error(w).find("not a vision mmproj"), std::string::npos);
  w.set("clip.has_vision_encoder", Value::boolean(true));
  w.set("clip.projector_type", Value::string("resampler"));
  EXPECT_NE(config_error(w).find("'resampler' is not supported"), std::string::npos);
  w.set("clip.projector_type", Value::string("mlp"));
  EXPECT_NE(config_error(w).find("clip.vision.image_size"), std::string::npos);
  for (auto [k, v] : {std::pair{"image_size", 30u}, {"patch_size", 8u}, {"embedding_length", 64u},
                      {"feed_forward_length", 128u}, {"block_count", 1u}, {"attention.head_count", 4u}})
    w.set(std::string("clip.vision.") + k, Value::u32(v));
  EXPECT_NE(config_error(w).find("not a multiple of the patch size"), std::string::npos);
  w.set("clip.vision.image_size", Value::u32(32));
  EXPECT_NE(config_error(w).find("image_mean"), std::string::npos);
  w.set("clip.vision.image_mean", Value::f32_array({0.5f, 0.5f}));
  EXPECT_NE(config_error(w).find("has 2 values"), std::string::npos);
  w.set("clip.vision.image_mean", Value::f32_array({0.5f, 0.5f, 0.5f}));
  w.set("clip.vision.image_std", Value::f32_array({0.5f, 0.0f, 0.5f}));
  EXPECT_NE(config_error(w).find("<= 0"), std::string::npos);
  w.set("clip.vision.image_std", Value::f32_array({0.5f, 0.5f, 0.5f}));
  EXPECT_NE(config_error(w).find("mm.0.weight"), std::string::npos);
}

TEST_F(ClipEncoderTest, AMissingTensorIsNamed) {
  // Re-write the synthesized file without one layer tensor.
  auto file = gguf::GgufFile::open(path_);
  ASSERT_TRUE(file.ok());
  gguf::GgufWriter w;
  for (const auto& [k, v] : (*file)->metadata()) w.set(k, v);
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    if (t.name == "v.blk.1.ffn_up.weight") continue;
    ASSERT_TRUE(w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)).ok());
  }
  std::string broken = dir_.file("broken.gguf");
  ASSERT_TRUE(w.write(broken).ok());
  auto backend = kernels::make_cpu_backend({.n_threads = 1});
  auto enc = VisionEncoder::open(broken, *backend);
  ASSERT_FALSE(enc.ok());
  EXPECT_NE(enc.error().find("v.blk.1.ffn_up.weight"), std::string::npos) << enc.error();
}

}  // namespace
}  // namespace cadenza::vision
