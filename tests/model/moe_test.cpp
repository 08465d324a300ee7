// Mixture of experts: matmul_experts (grouped by expert) against one dense matmul per (token,
// slot) bit for bit and against a naive formula, for several weight types and both x layouts;
// batch invariance of a quantized MoE model; the experts-per-token override; routing statistics.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"
#include "shared_data.h"
#include "synthetic_model.h"
#include "tensor/quant.h"

namespace cadenza {
namespace {

using kernels::Backend;
using kernels::Buffer;
using kernels::IndexMatrix;
using kernels::Matrix;
using kernels::Weight;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::unique_ptr<Buffer> to_backend(Backend& be, const void* data, size_t bytes) {
  Result<std::unique_ptr<Buffer>> b = be.allocate(bytes);
  EXPECT_TRUE(b);
  be.write(**b, 0, data, bytes);
  return std::move(*b);
}

std::vector<float> from_backend(Backend& be, const Buffer& b, size_t n) {
  std::vector<float> v(n);
  be.read(b, 0, v.data(), n * sizeof(float));
  return v;
}

// [matrices][rows][cols] f32 values encoded as `type`.
std::vector<uint8_t> encode(DType type, const std::vector<float>& values, int64_t cols) {
  const size_t row = static_cast<size_t>(*row_bytes(type, cols));
  const size_t rows = values.size() / static_cast<size_t>(cols);
  std::vector<uint8_t> bytes(row * rows);
  for (size_t r = 0; r < rows; ++r) {
    quantize_row(type, values.data() + r * static_cast<size_t>(cols), bytes.data() + r * row, cols);
  }
  return bytes;
}

std::unique_ptr<Weight> upload(Backend& be, DType type, const uint8_t* bytes, int64_t cols,
                               int64_t rows, int64_t matrices) {
  kernels::WeightDesc desc;
  desc.name = "experts";
  desc.type = type;
  desc.cols = cols;
  desc.rows = rows;
  desc.matrices = matrices;
  desc.data = bytes;
  Result<std::unique_ptr<Weight>> w = be.upload_weight(desc);
  EXPECT_TRUE(w) << w.error();
  return std::move(*w);
}

TEST(Moe, GroupedExpertMatmulEqualsOneDenseMatmulPerSlot) {
  std::unique_ptr<Backend> be = kernels::make_cpu_backend({.n_threads = 2});
  const int64_t n = 13, E = 6, K = 3, k = 256, m = 48;
  for (const DType type : {DType::Q8_0, DType::Q4_K, DType::F16}) {
    for (const bool per_slot : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(type)) + (per_slot ? " x [n*K][k]" : " x [n][k]"));
      const std::vector<float> values = random_floats(static_cast<size_t>(E * m * k), 3);
      const std::vector<uint8_t> bytes = encode(type, values, k);
      std::unique_ptr<Weight> w = upload(*be, type, bytes.data(), k, m, E);
      const size_t matrix_bytes = bytes.size() / static_cast<size_t>(E);
      // Random distinct experts per token; expert 5 unused, expert 0 popular.
      std::mt19937 rng(11);
      std::vector<int32_t> ids;
      for (int64_t t = 0; t < n; ++t) {
        std::vector<int32_t> pool = {0, 1, 2, 3, 4};
        std::shuffle(pool.begin() + 1, pool.end(), rng);
        ids.insert(ids.end(), pool.begin(), pool.begin() + K);
      }
      const int64_t x_rows = per_slot ? n * K : n;
      const std::vector<float> x = random_floats(static_cast<size_t>(x_rows * k), 5);
      auto xb = to_backend(*be, x.data(), x.size() * sizeof(float));
      auto ib = to_backend(*be, ids.data(), ids.size() * sizeof(int32_t));
      auto yb = to_backend(*be, std::vector<float>(static_cast<size_t>(n * K * m)).data(),
                           static_cast<size_t>(n * K * m) * sizeof(float));
      be->matmul_experts(*w, Matrix::of(xb->data(), x_rows, k), IndexMatrix::of(ib->data(), n, K),
                         Matrix::of(yb->data(), n * K, m));
      const std::vector<float> y = from_backend(*be, *yb, static_cast<size_t>(n * K * m));

      // Dense per-expert weights: one matmul per (token, slot) with n = 1.
      std::vector<std::unique_ptr<Weight>> dense;
      for (int64_t e = 0; e < E; ++e) {
        dense.push_back(upload(*be, type, bytes.data() + static_cast<size_t>(e) * matrix_bytes, k, m, 1));
      }
      auto one_x = to_backend(*be, x.data(), static_cast<size_t>(k) * sizeof(float));
      auto one_y = to_backend(*be, y.data(), static_cast<size_t>(m) * sizeof(float));
      double max_err = 0, max_ref = 0;
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t s = 0; s < K; ++s) {
          const int32_t e = ids[static_cast<size_t>(t * K + s)];
          const float* xr = x.data() + (per_slot ? t * K + s : t) * k;
          be->write(*one_x, 0, xr, static_cast<size_t>(k) * sizeof(float));
          be->matmul(*dense[static_cast<size_t>(e)], Matrix::of(one_x->data(), 1, k),
                     Matrix::of(one_y->data(), 1, m));
          const std::vector<float> ref = from_backend(*be, *one_y, static_cast<size_t>(m));
          const float* got = y.data() + (t * K + s) * m;
          ASSERT_EQ(std::memcmp(ref.data(), got, static_cast<size_t>(m) * sizeof(float)), 0)
              << "token " << t << " slot " << s;
          // Naive formula on the stored (decoded) weights, f32 activations.
          std::vector<float> wrow(static_cast<size_t>(k));
          for (int64_t r = 0; r < m; ++r) {
            dequantize_row(type, bytes.data() + static_cast<size_t>(e) * matrix_bytes +
                                     static_cast<size_t>(r) * (matrix_bytes / static_cast<size_t>(m)),
                           wrow.data(), k);
            double acc = 0;
            for (int64_t i = 0; i < k; ++i) acc += static_cast<double>(wrow[static_cast<size_t>(i)]) * xr[i];
            max_err = std::max(max_err, std::abs(acc - got[r]));
            max_ref = std::max(max_ref, std::abs(acc));
          }
        }
      }
      // Quantized types see 8-bit activations: ~1% of the output scale.
      EXPECT_LT(max_err, (type == DType::F16 ? 1e-4 : 2e-2) * max_ref);
    }
  }
}

using test::make_synthetic;
using test::SyntheticSpec;

SyntheticSpec moe_spec() {
  SyntheticSpec s;
  s.arch = "qwen3moe";
  s.qk_norm = true;
  s.head_dim = 16;
  s.tied = true;
  s.embd = 64;
  s.experts = 8;
  s.experts_used = 3;
  s.ff_expert = 64;
  s.type = DType::Q8_0;
  return s;
}

std::vector<float> eval_all(model::Model& m, const std::vector<int32_t>& tokens, int32_t chunk) {
  model::SessionOptions options;
  options.max_tokens = static_cast<int32_t>(tokens.size());
  options.max_batch_tokens = chunk;
  Result<std::unique_ptr<model::Session>> session = model::Session::create(m, options);
  EXPECT_TRUE(session) << session.error();
  Result<std::vector<float>> logits = (*session)->eval_all(tokens);
  EXPECT_TRUE(logits) << logits.error();
  return logits ? *logits : std::vector<float>();
}

std::vector<int32_t> some_tokens(size_t n, int64_t vocab) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 37 + 11) % static_cast<size_t>(vocab));
  return t;
}

TEST(Moe, QuantizedModelIsBatchInvariant) {
  std::unique_ptr<Backend> be = kernels::make_cpu_backend({.n_threads = 2});
  Result<std::unique_ptr<model::Model>> m = model::Model::load(make_synthetic(moe_spec()), *be);
  ASSERT_TRUE(m) << m.error();
  const std::vector<int32_t> tokens = some_tokens(29, 64);
  const std::vector<float> one = eval_all(**m, tokens, 512);
  for (const int32_t chunk : {1, 4, 7}) {
    const std::vector<float> other = eval_all(**m, tokens, chunk);
    ASSERT_EQ(one.size(), other.size());
    EXPECT_EQ(std::memcmp(one.data(), other.data(), one.size() * sizeof(float)), 0) << chunk;
  }
}

TEST(Moe, ExpertsPerTokenOverrideChangesRoutingAndIsValidated) {
  std::unique_ptr<Backend> be = kernels::make_cpu_backend({.n_threads = 2});
  const auto file = make_synthetic(moe_spec());
  auto base = model::Model::load(file, *be);
  auto one = model::Model::load(file, *be, {.experts_per_token = 1});
  auto all = model::Model::load(file, *be, {.experts_per_token = 8});
  ASSERT_TRUE(base && one && all);
  EXPECT_EQ((*base)->config().n_experts_used, 3);
  EXPECT_EQ((*one)->config().n_experts_used, 1);
  const std::vector<int32_t> tokens = some_tokens(9, 64);
  EXPECT_NE(eval_all(**base, tokens, 512), eval_all(**one, tokens, 512));
  EXPECT_EQ(eval_all(**all, tokens, 512).size(), tokens.size() * 64);
  for (const int64_t bad : {int64_t{9}, int64_t{-1}}) {
    auto r = model::Model::load(file, *be, {.experts_per_token = bad});
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find("experts per token"), std::string::npos) << r.error();
  }
  SyntheticSpec dense;
  auto d = model::Model::load(make_synthetic(dense), *be, {.experts_per_token = 2});
  EXPECT_FALSE(d);
}

TEST(Moe, RoutingStatisticsSumToTokensTimesExpertsUsed) {
  std::unique_ptr<Backend> be = kernels::make_cpu_backend({.n_threads = 2});
  const auto file = make_synthetic(moe_spec());
  for (const int64_t K : {int64_t{3}, int64_t{2}}) {
    auto m = model::Model::load(file, *be, {.experts_per_token = K});
    ASSERT_TRUE(m) << m.error();
    const std::vector<int32_t> tokens = some_tokens(17, 64);
    eval_all(**m, tokens, 5);
    const std::vector<uint64_t> counts = (*m)->expert_token_counts();
    ASSERT_EQ(counts.size(), 2u * 8u);
    for (int64_t l = 0; l < 2; ++l) {
      uint64_t total = 0;
      for (int64_t e = 0; e < 8; ++e) {
        EXPECT_EQ((*m)->expert_tokens(l, e), counts[static_cast<size_t>(l * 8 + e)]);
        total += counts[static_cast<size_t>(l * 8 + e)];
      }
      EXPECT_EQ(total, tokens.size() * static_cast<uint64_t>(K)) << "layer " << l;
    }
    (*m)->reset_expert_token_counts();
    for (const uint64_t c : (*m)->expert_token_counts()) EXPECT_EQ(c, 0u);
  }
  // Each step reads each active expert matrix once: at most 8 per matmul_experts call.
  const kernels::cpu::ExpertCounters before = kernels::cpu::expert_counters();
  auto m = model::Model::load(file, *be);
  ASSERT_TRUE(m);
  eval_all(**m, some_tokens(16, 64), 512);
  const kernels::cpu::ExpertCounters after = kernels::cpu::expert_counters();
  EXPECT_EQ(after.calls - before.calls, 2u * 3u);  // 2 layers x (gate, up, down)
  EXPECT_LE(after.matrices - before.matrices, 2u * 3u * 8u);
}

TEST(Moe, SharedMoeModelsAreBatchInvariantAndCountRouting) {
  CADENZA_REQUIRE_SHARED();
  std::unique_ptr<Backend> be = kernels::make_cpu_backend({.n_threads = 2});
  for (const char* name : {"tiny-qwen3moe-f16", "tiny-mixtral-f16"}) {
    SCOPED_TRACE(name);
    const std::filesystem::path dir = test::shared_dir();
    std::ifstream golden_file(dir / "golden" / (std::string(name) + ".json"));
    ASSERT_TRUE(golden_file);
    const nlohmann::json golden = nlohmann::json::parse(golden_file);
    std::vector<int32_t> tokens = golden["cases"][5]["tokens"].get<std::vector<int32_t>>();
    tokens.resize(std::min<size_t>(tokens.size(), 40));
    auto m = model::Model::open((dir / "models" / (std::string(name) + ".gguf")).string(), *be);
    ASSERT_TRUE(m) << m.error();
    const std::vector<float> one = eval_all(**m, tokens, 512);
    EXPECT_EQ(one, eval_all(**m, tokens, 1)) << "token by token";
    EXPECT_EQ(one, eval_all(**m, tokens, 7)) << "chunks of 7";
    const model::ModelConfig& c = (*m)->config();
    const std::vector<uint64_t> counts = (*m)->expert_token_counts();
    uint64_t total = 0;
    for (int64_t e = 0; e < c.n_experts; ++e) total += counts[static_cast<size_t>(e)];
    EXPECT_EQ(total, 3 * tokens.size() * static_cast<uint64_t>(c.n_experts_used));
  }
}

}  // namespace
}  // namespace cadenza
