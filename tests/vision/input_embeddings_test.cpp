// Input embeddings in place of token lookups (Batch::embd_rows, Session::eval with
// InputEmbeddings): the path image embeddings take into the language model.
#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "model/host_ops.h"
#include "model/model.h"
#include "model/session.h"
#include "gguf/gguf.h"
#include "temp_dir.h"
#include "test_models.h"

namespace cadenza::model {
namespace {

class InputEmbeddingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("lm.gguf");
    ASSERT_TRUE(synth::write_synthetic_model(cadenza::test::tiny_model_options(5), path_).ok());
    backend_ = kernels::make_cpu_backend({.n_threads = 1});
    auto m = Model::open(path_, *backend_);
    ASSERT_TRUE(m.ok()) << m.error();
    model_ = std::move(*m);
    auto file = gguf::GgufFile::open(path_);
    ASSERT_TRUE(file.ok());
    auto table = host_tensor(**file, "token_embd.weight", 64, 300);
    ASSERT_TRUE(table.ok()) << table.error();
    table_ = std::move(*table);
  }
  std::vector<float> row(int32_t token) const {
    return {table_.begin() + token * 64, table_.begin() + (token + 1) * 64};
  }
  Result<std::vector<float>> eval(const std::vector<int32_t>& tokens, const InputEmbeddings* e = nullptr) {
    auto s = Session::create(*model_, {.max_tokens = 64, .max_batch_tokens = 3});
    if (!s) return s.error_value();
    return e ? (*s)->eval(tokens, *e) : (*s)->eval(tokens);
  }
  cadenza::test::TempDir dir_;
  std::string path_;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<Model> model_;
  std::vector<float> table_;
};

TEST_F(InputEmbeddingsTest, AGivenEmbeddingActsAsItsToken) {
  // Tokens 40..43 given as embeddings at rows holding token 0 (a placeholder), across the
  // session's 3-token batches: the same logits as the real tokens.
  const std::vector<int32_t> real = {1, 7, 40, 41, 42, 43, 9};
  const std::vector<int32_t> placeholder = {1, 7, 0, 0, 0, 0, 9};
  std::vector<float> values;
  for (int32_t t : {40, 41, 42, 43}) {
    auto r = row(t);
    values.insert(values.end(), r.begin(), r.end());
  }
  InputEmbeddings e{.first = 2, .count = 4, .values = values};
  auto want = eval(real);
  auto got = eval(placeholder, &e);
  ASSERT_TRUE(want.ok() && got.ok());
  ASSERT_EQ(want->size(), got->size());
  for (size_t i = 0; i < want->size(); ++i) ASSERT_NEAR((*want)[i], (*got)[i], 1e-5f) << i;
  // Without the embeddings the placeholders give other logits (the test can fail).
  auto plain = eval(placeholder);
  ASSERT_TRUE(plain.ok());
  EXPECT_NE(*plain, *want);
}

TEST_F(InputEmbeddingsTest, BadRunsAreErrors) {
  std::vector<float> values(64 * 2, 0.5f);
  InputEmbeddings past{.first = 2, .count = 2, .values = values};
  auto outside = eval({1, 2, 3}, &past);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().find("outside"), std::string::npos);
  InputEmbeddings wrong{.first = 0, .count = 1, .values = values};
  auto size = eval({1, 2, 3}, &wrong);
  ASSERT_FALSE(size.ok());
  EXPECT_NE(size.error().find("input embedding values"), std::string::npos);
}

TEST_F(InputEmbeddingsTest, ModelForwardValidatesTheRows) {
  KvCacheOptions kv_options;
  kv_options.num_blocks = 2;
  kv_options.block_size = 4;
  auto kv = model_->create_kv_cache(kv_options);
  ASSERT_TRUE(kv.ok());
  const std::vector<int32_t> table = {1};
  const std::vector<std::span<const int32_t>> tables = {table};
  const std::vector<int32_t> tokens = {1, 2, 3}, positions = {0, 1, 2}, seq = {0, 0, 0}, logit_rows = {2};
  std::vector<float> logits(300);
  const std::vector<float> values(64 * 2, 0.25f);
  auto error = [&](std::vector<int32_t> rows, size_t n_values) {
    Batch b{tokens, positions, seq, tables, logit_rows};
    b.embd_rows = rows;
    b.embd_values = std::span<const float>(values).first(n_values);
    Status st = model_->forward(b, **kv, logits);
    return st ? std::string() : st.error();
  };
  EXPECT_EQ(error({0, 2}, 128), "");
  EXPECT_NE(error({1, 1}, 128).find("distinct"), std::string::npos);
  EXPECT_NE(error({0, 3}, 128).find("distinct and < 3"), std::string::npos);
  EXPECT_NE(error({-1, 0}, 128).find("distinct"), std::string::npos);
  EXPECT_NE(error({0, 1}, 64).find("64 input embedding values for 2 rows"), std::string::npos);
}

}  // namespace
}  // namespace cadenza::model
