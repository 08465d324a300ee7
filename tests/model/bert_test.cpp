// The bert encoder (model/encoder.h, arch/bert.cpp) against a plain double-precision forward pass
// written here from the architecture's definition (BERT paper / model card: embeddings sum,
// LayerNorm, post-norm layers with bidirectional attention and an exact-GELU FFN), over a
// synthesized model (`cadenza synth`'s bert plan at a fixed seed). Also: pooling, batching, the
// classification head of a cross-encoder, the WordPiece tokenization of the synthesized
// vocabulary, and errors.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/encoder.h"
#include "model/model.h"
#include "synth/synth.h"
#include "temp_dir.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::model {
namespace {

synth::ModelShape tiny_bert(int64_t pooling, int64_t classes) {
  synth::ModelShape s = *synth::find_preset("bge-small-en-v1.5");
  s.n_vocab = 200;
  s.n_ctx = 64;
  s.n_embd = 64;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 4;
  s.head_dim = 16;
  s.n_ff = 128;
  s.pooling_type = pooling;
  s.n_cls_out = classes;
  return s;
}

std::string write(const test::TempDir& dir, const synth::ModelShape& s, const char* name) {
  synth::SynthOptions o;
  o.shape = s;
  o.weight_type = "f32";
  o.seed = 11;
  const std::string path = (dir.path() / name).string();
  auto w = synth::write_synthetic_model(o, path);
  EXPECT_TRUE(w) << (w ? "" : w.error());
  return path;
}

// The naive reference, reading the f32 tensors straight from the file.
struct Reference {
  const gguf::GgufFile& f;
  int64_t d, H, ff;
  double eps;
  const float* t(const std::string& name) const {
    const gguf::TensorInfo* ti = f.find_tensor(name);
    EXPECT_NE(ti, nullptr) << name;
    EXPECT_EQ(ti->type, DType::F32);
    return reinterpret_cast<const float*>(ti->data);
  }
  // y[r] = W x[r] + b; W: [out][in].
  std::vector<double> linear(const std::vector<double>& x, int64_t n, int64_t in, int64_t out,
                             const std::string& w) const {
    const float* W = t(w + ".weight");
    const float* b = t(w + ".bias");
    std::vector<double> y(static_cast<size_t>(n * out));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < out; ++j) {
        double acc = b[j];
        for (int64_t i = 0; i < in; ++i) acc += W[j * in + i] * x[r * in + i];
        y[r * out + j] = acc;
      }
    return y;
  }
  void norm(std::vector<double>& x, int64_t n, const std::string& name) const {
    const float* w = t(name + ".weight");
    const float* b = t(name + ".bias");
    for (int64_t r = 0; r < n; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < d; ++i) mean += x[r * d + i];
      mean /= d;
      for (int64_t i = 0; i < d; ++i) var += (x[r * d + i] - mean) * (x[r * d + i] - mean);
      var /= d;
      for (int64_t i = 0; i < d; ++i)
        x[r * d + i] = (x[r * d + i] - mean) / std::sqrt(var + eps) * w[i] + b[i];
    }
  }
  std::vector<double> forward(const std::vector<int32_t>& tokens, const std::vector<int32_t>& types,
                              int64_t layers) const {
    const int64_t n = static_cast<int64_t>(tokens.size()), hd = d / H;
    std::vector<double> x(static_cast<size_t>(n * d));
    const float* te = t("token_embd.weight");
    const float* pe = t("position_embd.weight");
    const float* ty = t("token_types.weight");
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < d; ++i)
        x[r * d + i] = static_cast<double>(te[tokens[r] * d + i]) + pe[r * d + i] +
                       ty[(types.empty() ? 0 : types[r]) * d + i];
    norm(x, n, "token_embd_norm");
    for (int64_t il = 0; il < layers; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      auto q = linear(x, n, d, d, p + "attn_q"), k = linear(x, n, d, d, p + "attn_k"),
           v = linear(x, n, d, d, p + "attn_v");
      std::vector<double> a(static_cast<size_t>(n * d), 0.0);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < n; ++i) {
          std::vector<double> s(static_cast<size_t>(n));
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < n; ++j) {
            double dot = 0;
            for (int64_t c = 0; c < hd; ++c) dot += q[i * d + h * hd + c] * k[j * d + h * hd + c];
            s[j] = dot / std::sqrt(static_cast<double>(hd));
            mx = std::max(mx, s[j]);
          }
          for (int64_t j = 0; j < n; ++j) sum += (s[j] = std::exp(s[j] - mx));
          for (int64_t j = 0; j < n; ++j)
            for (int64_t c = 0; c < hd; ++c) a[i * d + h * hd + c] += s[j] / sum * v[j * d + h * hd + c];
        }
      auto o = linear(a, n, d, d, p + "attn_output");
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      norm(x, n, p + "attn_output_norm");
      auto up = linear(x, n, d, ff, p + "ffn_up");
      for (double& e : up) e = 0.5 * e * (1 + std::erf(e / std::sqrt(2.0)));
      auto down = linear(up, n, ff, d, p + "ffn_down");
      for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
      norm(x, n, p + "layer_output_norm");
    }
    return x;
  }
};

double max_rel(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, scale = 1e-6;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

TEST(Bert, ForwardMatchesThePlainReference) {
  test::TempDir dir("bert");
  const std::string path = write(dir, tiny_bert(2, 0), "bert.gguf");
  auto backend = kernels::make_cpu_backend({.n_threads = 2});
  auto enc = Encoder::open(path, *backend);
  ASSERT_TRUE(enc) << enc.error();
  const EncoderConfig& c = (*enc)->config();
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_token_types, 2);
  EXPECT_EQ(c.pooling, Pooling::kCls);
  Reference ref{(*enc)->file(), c.n_embd, c.n_heads, c.n_ff, c.norm_eps};

  const std::vector<int32_t> a = {2, 40, 41, 77, 90, 3}, b = {2, 15, 3, 60, 61, 62, 63, 3};
  const std::vector<int32_t> b_types = {0, 0, 0, 1, 1, 1, 1, 1};
  const std::vector<EncoderInput> both = {{a}, {b, b_types}};
  auto hidden = (*enc)->forward(both);
  ASSERT_TRUE(hidden) << hidden.error();
  ASSERT_EQ(hidden->size(), (a.size() + b.size()) * 64);
  const std::vector<double> ra = ref.forward(a, {}, c.n_layers), rb = ref.forward(b, b_types, c.n_layers);
  const std::vector<float> ha(hidden->begin(), hidden->begin() + a.size() * 64);
  const std::vector<float> hb(hidden->begin() + a.size() * 64, hidden->end());
  EXPECT_LT(max_rel(ha, ra), 1e-4);
  EXPECT_LT(max_rel(hb, rb), 1e-4);

  // Batching does not change a sequence's result: b alone gives the same rows.
  const std::vector<EncoderInput> alone = {{b, b_types}};
  auto hb_alone = (*enc)->forward(alone);
  ASSERT_TRUE(hb_alone);
  EXPECT_LT(max_rel(*hb_alone, std::vector<double>(hb.begin(), hb.end())), 1e-6);
  // The token types matter (the reference would not notice a model that ignored them).
  const std::vector<EncoderInput> untyped = {{b}};
  auto hb_untyped = (*enc)->forward(untyped);
  ASSERT_TRUE(hb_untyped);
  EXPECT_GT(max_rel(*hb_untyped, rb), 1e-3);

  // embed(): CLS pooling, L2-normalized.
  auto vecs = (*enc)->embed(both);
  ASSERT_TRUE(vecs) << vecs.error();
  ASSERT_EQ(vecs->size(), 2u);
  std::vector<double> cls(ra.begin(), ra.begin() + 64);
  double nrm = 0;
  for (double x : cls) nrm += x * x;
  for (double& x : cls) x /= std::sqrt(nrm);
  EXPECT_LT(max_rel((*vecs)[0], cls), 1e-4);
}

TEST(Bert, MeanPoolingAndQuantizedWeights) {
  test::TempDir dir("bert");
  synth::SynthOptions o;
  o.shape = tiny_bert(1, 0);
  o.weight_type = "q8_0";
  o.seed = 11;
  const std::string path = (dir.path() / "q8.gguf").string();
  ASSERT_TRUE(synth::write_synthetic_model(o, path));
  auto backend = kernels::make_cpu_backend({.n_threads = 1});
  auto enc = Encoder::open(path, *backend);
  ASSERT_TRUE(enc) << enc.error();
  EXPECT_EQ((*enc)->config().pooling, Pooling::kMean);
  const std::vector<int32_t> a = {2, 50, 51, 52, 3};
  const std::vector<EncoderInput> in = {{a}};
  auto h = (*enc)->forward(in);
  auto v = (*enc)->embed(in);
  ASSERT_TRUE(h && v);
  std::vector<float> mean = pool(*h, 5, 64, Pooling::kMean);
  l2_normalize(mean);
  EXPECT_EQ((*v)[0], mean);
  double nrm = 0;
  for (float x : (*v)[0]) nrm += static_cast<double>(x) * x;
  EXPECT_NEAR(nrm, 1.0, 1e-5);
}

TEST(Bert, CrossEncoderHead) {
  test::TempDir dir("bert");
  const std::string path = write(dir, tiny_bert(4, 1), "rerank.gguf");
  auto backend = kernels::make_cpu_backend({.n_threads = 1});
  auto enc = Encoder::open(path, *backend);
  ASSERT_TRUE(enc) << enc.error();
  const EncoderConfig& c = (*enc)->config();
  EXPECT_EQ(c.pooling, Pooling::kRank);
  EXPECT_EQ(c.n_classes, 1);
  const std::vector<int32_t> a = {2, 40, 3, 50, 51, 3}, types = {0, 0, 0, 1, 1, 1};
  const std::vector<EncoderInput> in = {{a, types}};
  auto logits = (*enc)->classify(in);
  ASSERT_TRUE(logits) << logits.error();
  ASSERT_EQ(logits->size(), 1u);
  ASSERT_EQ((*logits)[0].size(), 1u);
  // By hand: cls.output(tanh(cls(h[0]))).
  Reference ref{(*enc)->file(), c.n_embd, c.n_heads, c.n_ff, c.norm_eps};
  const std::vector<double> h = ref.forward(a, types, c.n_layers);
  auto pooled = ref.linear(std::vector<double>(h.begin(), h.begin() + 64), 1, 64, 64, "cls");
  for (double& x : pooled) x = std::tanh(x);
  const auto out = ref.linear(pooled, 1, 64, 1, "cls.output");
  EXPECT_NEAR((*logits)[0][0], out[0], 1e-4 * std::max(1.0, std::abs(out[0])));
  EXPECT_FALSE((*enc)->embed(in));  // a reranker gives no embedding
}

TEST(Bert, BadInputsAreErrors) {
  test::TempDir dir("bert");
  const std::string path = write(dir, tiny_bert(2, 0), "bert.gguf");
  auto backend = kernels::make_cpu_backend({.n_threads = 1});
  auto enc = Encoder::open(path, *backend);
  ASSERT_TRUE(enc);
  const std::vector<int32_t> empty, big(65, 5), bad_id = {2, 200, 3}, ok = {2, 5, 3},
                             bad_type = {0, 2, 0}, short_types = {0};
  EXPECT_FALSE((*enc)->forward({}));
  for (const auto& in : {std::vector<EncoderInput>{{empty}}, std::vector<EncoderInput>{{big}},
                         std::vector<EncoderInput>{{bad_id}},
                         std::vector<EncoderInput>{{ok, bad_type}},
                         std::vector<EncoderInput>{{ok, short_types}}})
    EXPECT_FALSE((*enc)->forward(in));
  EXPECT_FALSE((*enc)->classify(std::vector<EncoderInput>{{ok}}));  // no head
  // The decoder loader refuses an encoder file with a clear error, and the encoder a decoder.
  auto m = Model::open(path, *backend);
  EXPECT_FALSE(m);
}

TEST(Bert, WordPieceVocabularyOfTheSynthesizedModel) {
  test::TempDir dir("bert");
  const std::string path = write(dir, tiny_bert(2, 0), "bert.gguf");
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file);
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok) << tok.error();
  const std::vector<int32_t> ids = (*tok)->encode("Hello, World!", true, false);
  // [CLS] ▁hello ▁, ▁world ▁! [SEP]
  ASSERT_EQ(ids.size(), 6u);
  EXPECT_EQ(ids.front(), 2);
  EXPECT_EQ(ids.back(), 3);
  EXPECT_EQ(ids[1], (*tok)->find_token("\xE2\x96\x81hello"));  // lowercased
  EXPECT_EQ(ids[3], (*tok)->find_token("\xE2\x96\x81world"));
  EXPECT_EQ(ids[2], (*tok)->find_token("\xE2\x96\x81,"));
}

}  // namespace
}  // namespace cadenza::model
