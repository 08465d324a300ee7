// Pooling (model/pooling.h) and the final-hidden-state seam (Model::forward_hidden through
// Session::hidden_all) that decoder embedding models pool.
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/pooling.h"
#include "model/session.h"
#include "synth/synth.h"
#include "temp_dir.h"
#include "test_models.h"

namespace cadenza::model {
namespace {

TEST(Pooling, MeanClsLastOfKnownRows) {
  // 3 tokens x 2 features.
  const std::vector<float> h = {1, 2, 3, 4, 5, 9};
  EXPECT_EQ(pool(h, 3, 2, Pooling::kMean), (std::vector<float>{3, 5}));
  EXPECT_EQ(pool(h, 3, 2, Pooling::kCls), (std::vector<float>{1, 2}));
  EXPECT_EQ(pool(h, 3, 2, Pooling::kLast), (std::vector<float>{5, 9}));
  EXPECT_EQ(pool(std::vector<float>{7, -1}, 1, 2, Pooling::kMean), (std::vector<float>{7, -1}));
}

TEST(Pooling, L2NormalizeAndCosine) {
  std::vector<float> v = {3, 4};
  l2_normalize(v);
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
  std::vector<float> zero = {0, 0};
  l2_normalize(zero);  // stays zero, no NaN
  EXPECT_EQ(zero, (std::vector<float>{0, 0}));
  EXPECT_NEAR(cosine_similarity(std::vector<float>{1, 0}, std::vector<float>{1, 1}),
              1 / std::sqrt(2.0), 1e-12);
  EXPECT_EQ(cosine_similarity(std::vector<float>{1, 0}, zero), 0);
}

TEST(Pooling, NamesRoundTrip) {
  for (Pooling p : {Pooling::kNone, Pooling::kMean, Pooling::kCls, Pooling::kLast, Pooling::kRank})
    EXPECT_EQ(parse_pooling(pooling_name(p)), p);
  EXPECT_FALSE(parse_pooling("avg"));
  EXPECT_FALSE(parse_pooling(""));
}

std::string synth_model(const test::TempDir& dir, int64_t pooling_type, const char* name) {
  synth::SynthOptions o = test::tiny_model_options(7);
  o.shape.pooling_type = pooling_type;
  const std::string path = (dir.path() / name).string();
  auto written = synth::write_synthetic_model(o, path);
  EXPECT_TRUE(written) << (written ? "" : written.error());
  return path;
}

TEST(Pooling, ReadFromMetadata) {
  test::TempDir dir("pooling");
  for (int64_t type : {1, 2, 3, 4}) {
    auto file = gguf::GgufFile::open(synth_model(dir, type, "m.gguf"));
    ASSERT_TRUE(file) << file.error();
    auto p = pooling_of(**file);
    ASSERT_TRUE(p) << p.error();
    ASSERT_TRUE(p->has_value());
    EXPECT_EQ(static_cast<int64_t>(**p), type);
  }
  auto plain = gguf::GgufFile::open(synth_model(dir, -1, "plain.gguf"));
  ASSERT_TRUE(plain);
  auto p = pooling_of(**plain);
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->has_value());  // a chat model: no pooling type
  auto bad = gguf::GgufFile::open(synth_model(dir, 9, "bad.gguf"));
  ASSERT_TRUE(bad);
  EXPECT_FALSE(pooling_of(**bad));  // out of range: an error, not a guess
}

// The hidden state is exactly what the output head multiplies: logits = hidden . W^T with W the
// (tied) embedding table, for every token, computed here on the host from the file's f32 bytes.
TEST(HiddenStates, AreTheOutputHeadInput) {
  test::TempDir dir("hidden");
  const std::string path = synth_model(dir, -1, "m.gguf");
  auto backend = kernels::make_cpu_backend({.n_threads = 1});
  auto model = Model::open(path, *backend);
  ASSERT_TRUE(model) << model.error();
  const ModelConfig& c = (*model)->config();
  const gguf::TensorInfo* w = (*model)->file().find_tensor("output.weight");
  if (w == nullptr) w = (*model)->file().find_tensor("token_embd.weight");
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->type, DType::F32);
  const float* W = reinterpret_cast<const float*>(w->data);

  // 40 tokens in steps of 16: the hidden rows of every chunk land in order.
  std::vector<int32_t> tokens(40);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 5) % c.n_vocab);
  auto sess = Session::create(**model, {.max_tokens = 64, .max_batch_tokens = 16});
  ASSERT_TRUE(sess) << sess.error();
  auto logits = (*sess)->eval_all(tokens);
  ASSERT_TRUE(logits) << logits.error();
  (*sess)->reset();
  auto hidden = (*sess)->hidden_all(tokens);
  ASSERT_TRUE(hidden) << hidden.error();
  ASSERT_EQ(hidden->size(), tokens.size() * static_cast<size_t>(c.n_embd));
  EXPECT_EQ((*sess)->n_past(), 40);
  double max_err = 0, max_abs = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (int64_t v = 0; v < c.n_vocab; ++v) {
      double dot = 0;
      for (int64_t i = 0; i < c.n_embd; ++i)
        dot += static_cast<double>((*hidden)[t * c.n_embd + i]) * W[v * c.n_embd + i];
      const double got = (*logits)[t * c.n_vocab + v];
      max_err = std::max(max_err, std::abs(dot - got));
      max_abs = std::max(max_abs, std::abs(got));
    }
  }
  EXPECT_GT(max_abs, 0.1);  // not a degenerate all-zero comparison
  EXPECT_LT(max_err, 1e-3 * std::max(1.0, max_abs));
}

TEST(HiddenStates, WrongBufferSizeIsAnError) {
  test::TempDir dir("hidden");
  auto backend = kernels::make_cpu_backend({.n_threads = 1});
  auto model = Model::open(synth_model(dir, -1, "m.gguf"), *backend);
  ASSERT_TRUE(model) << model.error();
  auto kv = (*model)->create_kv_cache({.num_blocks = 4, .block_size = 16});
  ASSERT_TRUE(kv);
  const std::vector<int32_t> tokens = {1, 2, 3}, pos = {0, 1, 2}, seq = {0, 0, 0}, rows = {2};
  const std::vector<int32_t> table = {0};
  const std::span<const int32_t> t(table);
  Batch b{tokens, pos, seq, std::span<const std::span<const int32_t>>(&t, 1), rows};
  std::vector<float> out((*model)->config().n_embd + 1);
  EXPECT_FALSE((*model)->forward_hidden(b, **kv, out));
  out.resize((*model)->config().n_embd);
  EXPECT_TRUE((*model)->forward_hidden(b, **kv, out));
}

}  // namespace
}  // namespace cadenza::model
