// eval/activation_recorder.h: the importance statistics it records, op by op and over a whole
// model, and that the model computes exactly what it computes without the recorder.
#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "eval/activation_recorder.h"
#include "eval/chunk_runner.h"
#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "shared_data.h"
#include "synth/synth.h"
#include "temp_dir.h"
#include "test_models.h"

namespace cadenza::eval {
namespace {

std::unique_ptr<kernels::Weight> f32_weight(kernels::Backend& b, const std::string& name,
                                            int64_t cols, int64_t rows, int64_t matrices,
                                            const std::vector<float>& values) {
  kernels::WeightDesc d;
  d.name = name;
  d.cols = cols;
  d.rows = rows;
  d.matrices = matrices;
  d.data = values.data();
  auto w = b.upload_weight(d);
  EXPECT_TRUE(w) << w.error();
  return std::move(*w);
}

TEST(ActivationRecorder, MatmulAddsEachRowsSquaresAndCountsRows) {
  auto cpu = kernels::make_cpu_backend({.n_threads = 1});
  quantize::Imatrix im;
  ActivationRecorder rec(*cpu, im);
  const std::vector<float> wv = {1, 2, 3, 4, 5, 6, 7, 8};  // [2][4]
  auto w = f32_weight(rec, "blk.0.ffn_up.weight", 4, 2, 1, wv);
  auto head = f32_weight(rec, "output.weight", 4, 2, 1, wv);
  auto xb = rec.allocate(2 * 4 * sizeof(float));
  auto yb = rec.allocate(2 * 2 * sizeof(float));
  const std::vector<float> x = {1, -2, 0.5f, 3, -1, 1, 2, 0};
  rec.write(**xb, 0, x.data(), x.size() * sizeof(float));
  kernels::Matrix xm = kernels::Matrix::of((*xb)->data(), 2, 4);
  kernels::Matrix ym = kernels::Matrix::of((*yb)->data(), 2, 2);
  rec.matmul(*w, xm, ym);
  rec.matmul(*w, xm.row_range(1, 1), ym.row_range(0, 1));
  rec.matmul(*head, xm, ym);  // the LM head: not recorded by default
  rec.set_recording(false);
  rec.matmul(*w, xm, ym);  // off: not recorded
  ASSERT_EQ(im.entries.size(), 1u);
  const quantize::ImatrixEntry& e = im.entries.at("blk.0.ffn_up.weight");
  EXPECT_EQ(e.cols, 4);
  EXPECT_EQ(e.matrices, 1);
  EXPECT_EQ(e.counts[0], 3.0);
  const double want[4] = {1 + 1 + 1, 4 + 1 + 1, 0.25 + 4 + 4, 9 + 0 + 0};
  for (int c = 0; c < 4; ++c) EXPECT_DOUBLE_EQ(e.sum2[static_cast<size_t>(c)], want[c]) << c;
  // The product is the inner backend's: y = x w^T for the last call.
  std::vector<float> y(4);
  rec.read(**yb, 0, y.data(), y.size() * sizeof(float));
  EXPECT_FLOAT_EQ(y[0], 1 * 1 - 2 * 2 + 0.5f * 3 + 3 * 4);
  std::vector<float> imp;
  ASSERT_TRUE(im.importance("blk.0.ffn_up.weight", 0, imp));
  EXPECT_DOUBLE_EQ(imp[1], 6.0 / 3.0);
  EXPECT_FALSE(im.importance("blk.0.ffn_up.weight", 1, imp));
  EXPECT_FALSE(im.importance("output.weight", 0, imp));
}

TEST(ActivationRecorder, ExpertRowsGoToTheirExpertsMatrix) {
  auto cpu = kernels::make_cpu_backend({.n_threads = 1});
  quantize::Imatrix im;
  ActivationRecorder rec(*cpu, im);
  std::vector<float> wv(3 * 2 * 2, 0.5f);  // 3 experts of [2][2]
  auto w = f32_weight(rec, "blk.1.ffn_down_exps.weight", 2, 2, 3, wv);
  // Two tokens, two slots each; token 1's second slot is another rank's expert (-1).
  const std::vector<float> x = {1, 2, 3, 4};  // [2 tokens][2]: shared by the token's slots
  const std::vector<int32_t> ids = {2, 0, 2, -1};
  auto xb = rec.allocate(x.size() * sizeof(float));
  auto ib = rec.allocate(ids.size() * sizeof(int32_t));
  auto yb = rec.allocate(4 * 2 * sizeof(float));
  rec.write(**xb, 0, x.data(), x.size() * sizeof(float));
  rec.write(**ib, 0, ids.data(), ids.size() * sizeof(int32_t));
  rec.matmul_experts(*w, kernels::Matrix::of((*xb)->data(), 2, 2),
                     kernels::IndexMatrix::of((*ib)->data(), 2, 2),
                     kernels::Matrix::of((*yb)->data(), 4, 2));
  const quantize::ImatrixEntry& e = im.entries.at("blk.1.ffn_down_exps.weight");
  ASSERT_EQ(e.matrices, 3);
  EXPECT_EQ(e.counts, (std::vector<double>{1, 0, 2}));
  EXPECT_EQ(e.sum2, (std::vector<double>{1, 4, 0, 0, 1 + 9, 4 + 16}));
}

// The tiny model run through the perplexity chunks with and without the recorder: identical
// logits, and every layer's matmul weights recorded once per position.
TEST(ActivationRecorder, RecordsEveryMatmulOfAModelWithoutChangingIt) {
  const test::TempDir dir("recorder");
  const std::string path = dir.file("tiny.gguf");
  ASSERT_TRUE(synth::write_synthetic_model(test::tiny_model_options(3), path));
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file) << file.error();
  std::shared_ptr<const gguf::GgufFile> shared = std::move(*file);
  std::vector<int32_t> tokens(96);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 11) % 300);
  ChunkOptions o;
  o.ctx = 32;
  o.first = 16;
  o.n_chunks = 3;
  o.batch_tokens = 64;

  auto run = [&](kernels::Backend& backend) {
    auto model = model::Model::load(shared, backend);
    EXPECT_TRUE(model) << model.error();
    std::vector<float> all;
    Status st = run_chunks(**model, tokens, o, [&](int32_t, std::span<const float> logits) -> Status {
      all.insert(all.end(), logits.begin(), logits.end());
      return {};
    });
    EXPECT_TRUE(st) << st.error();
    return all;
  };
  auto plain_backend = kernels::make_cpu_backend({.n_threads = 2});
  const std::vector<float> plain = run(*plain_backend);
  auto inner = kernels::make_cpu_backend({.n_threads = 2});
  quantize::Imatrix im;
  ActivationRecorder rec(*inner, im);
  const std::vector<float> recorded = run(rec);
  ASSERT_EQ(plain, recorded);

  int matrices = 0;
  for (const gguf::TensorInfo& t : shared->tensors()) {
    if (t.shape.size() < 2 || t.name == "token_embd.weight" || t.name == "output.weight") continue;
    ++matrices;
    ASSERT_TRUE(im.entries.count(t.name)) << t.name;
    const quantize::ImatrixEntry& e = im.entries.at(t.name);
    EXPECT_EQ(e.cols, t.shape[0]) << t.name;
    EXPECT_EQ(e.counts[0], 3.0 * 32) << t.name;  // every position of every chunk
    const double sum = std::accumulate(e.sum2.begin(), e.sum2.end(), 0.0);
    EXPECT_GT(sum, 0.0) << t.name;
  }
  EXPECT_EQ(im.entries.size(), static_cast<size_t>(matrices));
  EXPECT_FALSE(im.entries.count("output.weight"));
}

// A mixture-of-experts model: each expert tensor's counts add up to tokens x experts per token.
TEST(ActivationRecorder, ExpertCountsAddUpToTokensTimesTopK) {
  CADENZA_REQUIRE_SHARED();
  auto file = gguf::GgufFile::open((test::shared_dir() / "models" / "tiny-qwen3moe-f16.gguf").string());
  ASSERT_TRUE(file) << file.error();
  std::shared_ptr<const gguf::GgufFile> shared = std::move(*file);
  auto inner = kernels::make_cpu_backend({.n_threads = 2});
  quantize::Imatrix im;
  ActivationRecorder rec(*inner, im);
  auto model = model::Model::load(shared, rec);
  ASSERT_TRUE(model) << model.error();
  std::vector<int32_t> tokens(64);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(1 + (i * 7) % 200);
  ChunkOptions o;
  o.ctx = 32;
  o.first = 16;
  o.n_chunks = 2;
  ASSERT_TRUE(run_chunks(**model, tokens, o, [](int32_t, std::span<const float>) -> Status { return {}; }));
  const int64_t top_k = (*model)->config().n_experts_used;
  ASSERT_GT(top_k, 0);
  int expert_tensors = 0;
  for (const auto& [name, e] : im.entries) {
    if (e.matrices == 1) continue;
    ++expert_tensors;
    EXPECT_EQ(e.matrices, (*model)->config().n_experts) << name;
    EXPECT_EQ(std::accumulate(e.counts.begin(), e.counts.end(), 0.0), 64.0 * static_cast<double>(top_k)) << name;
  }
  EXPECT_GT(expert_tensors, 0);
}

}  // namespace
}  // namespace cadenza::eval
