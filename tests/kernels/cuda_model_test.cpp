// Whole models on the CUDA backend: every architecture variant is batch invariant bit for bit and
// close to the CPU backend; the golden models of ../shared match the reference logits with the
// bounds of tests/model/golden_test.cpp, and CPU and GPU produce the same greedy continuation.
// Skips visibly without a CUDA device (and the golden part without ../shared).
//
// Bounds GPU vs CPU on synthetic models (max |logit difference|, scaled by 1 + max |logit|):
//  - F16/F32 weights: 2e-3 (both multiply f32 activations; summation orders differ).
//  - Q8_0/Q4_K: 0.05 (the CPU's SIMD kernels round activations to 8 bits, the GPU does not).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../model/synthetic_model.h"
#include "cuda_test_util.h"
#include "model/model.h"
#include "model/session.h"
#include "shared_data.h"

namespace cadenza::model {
namespace {

using test::make_synthetic;
using test::SyntheticSpec;

// The architectures of the CPU model tests plus a Q4_K model (the CUDA backend keeps Q4_K
// quantized, with its own kernel).
std::vector<SyntheticSpec> variants() {
  std::vector<SyntheticSpec> specs = test::architecture_variants();
  SyntheticSpec llama_q4k;
  llama_q4k.type = DType::Q4_K;
  llama_q4k.embd = 256;
  llama_q4k.ff = 256;
  specs.push_back(llama_q4k);
  return specs;
}

std::vector<int32_t> some_tokens(size_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

std::vector<float> eval_all(Model& model, std::span<const int32_t> tokens, int32_t max_batch_tokens,
                            int32_t block_size = 16, DType kv_type = DType::F16) {
  SessionOptions options;
  options.max_tokens = static_cast<int32_t>(tokens.size());
  options.max_batch_tokens = max_batch_tokens;
  options.block_size = block_size;
  options.kv_type = kv_type;
  Result<std::unique_ptr<Session>> session = Session::create(model, options);
  EXPECT_TRUE(session) << session.error();
  if (!session) return {};
  Result<std::vector<float>> logits = (*session)->eval_all(tokens);
  EXPECT_TRUE(logits) << logits.error();
  return logits ? *logits : std::vector<float>();
}

std::unique_ptr<kernels::Backend> cuda_backend() {
  Result<std::unique_ptr<kernels::Backend>> g = kernels::make_cuda_backend();
  EXPECT_TRUE(g) << g.error();
  return g ? std::move(*g) : nullptr;
}

TEST(CudaModel, EveryArchitectureIsBatchInvariantAndCloseToCpu) {
  CADENZA_REQUIRE_CUDA();
  std::unique_ptr<kernels::Backend> gpu = cuda_backend();
  ASSERT_TRUE(gpu);
  std::unique_ptr<kernels::Backend> cpu = kernels::make_cpu_backend({.n_threads = 2});
  for (const SyntheticSpec& spec : variants()) {
    const std::string what = spec.arch + " " + std::string(dtype_name(spec.type)) +
                             (spec.experts ? " experts" : "");
    SCOPED_TRACE(what);
    std::shared_ptr<const gguf::GgufFile> file = make_synthetic(spec);
    ASSERT_TRUE(file);
    Result<std::unique_ptr<Model>> gm = Model::load(file, *gpu);
    ASSERT_TRUE(gm) << gm.error();
    Result<std::unique_ptr<Model>> cm = Model::load(file, *cpu);
    ASSERT_TRUE(cm) << cm.error();
    const std::vector<int32_t> tokens = some_tokens(37, spec.vocab, 7);
    std::vector<DType> kv_types = {DType::F16, DType::F32};
    const int64_t head_dim = spec.head_dim ? spec.head_dim : spec.embd / spec.heads;
    if (head_dim % 32 == 0) kv_types.push_back(DType::Q8_0);
    for (DType kv : kv_types) {
      const std::vector<float> one_batch = eval_all(**gm, tokens, 512, 16, kv);
      ASSERT_EQ(one_batch.size(), tokens.size() * static_cast<size_t>(spec.vocab));
      for (float v : one_batch) ASSERT_TRUE(std::isfinite(v));
      EXPECT_TRUE(test::bitwise_equal(one_batch, eval_all(**gm, tokens, 1, 16, kv))) << "token by token";
      EXPECT_TRUE(test::bitwise_equal(one_batch, eval_all(**gm, tokens, 5, 16, kv))) << "chunks of 5";
      EXPECT_TRUE(test::bitwise_equal(one_batch, eval_all(**gm, tokens, 512, 3, kv))) << "block size 3";
      const std::vector<float> on_cpu = eval_all(**cm, tokens, 512, 16, kv);
      double worst = 0, scale = 0;
      for (size_t i = 0; i < on_cpu.size() && i < one_batch.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::abs(one_batch[i] - on_cpu[i])));
        scale = std::max(scale, static_cast<double>(std::abs(on_cpu[i])));
      }
      const bool quantized = spec.type != DType::F16 && spec.type != DType::F32;
      const double bound = (quantized ? 0.05 : 2e-3) * (1.0 + scale);
      std::cout << "[cuda] " << what << " kv " << dtype_name(kv) << ": max |gpu - cpu| logit "
                << worst << " (max |logit| " << scale << ", bound " << bound << ")\n";
      EXPECT_LE(worst, bound);
    }
  }
}

// --- golden models (../shared) ---

constexpr double kF16Bound = 2e-2;        // tests/model/golden_test.cpp
constexpr double kQuantizedBound = 0.12;  // tests/model/golden_test.cpp


int32_t argmax(const float* logits, int64_t n) {
  return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
}

// The 16-token greedy continuation of `tokens` (logits of the prompt in `prompt_logits`).
std::vector<int32_t> greedy(Model& model, const std::vector<int32_t>& tokens, size_t steps,
                            std::vector<float>* prompt_logits) {
  SessionOptions options;
  options.max_tokens = static_cast<int32_t>(tokens.size() + steps + 1);
  Result<std::unique_ptr<Session>> session = Session::create(model, options);
  EXPECT_TRUE(session) << session.error();
  if (!session) return {};
  Result<std::vector<float>> logits = (*session)->eval_all(tokens);
  EXPECT_TRUE(logits) << logits.error();
  if (!logits) return {};
  const int64_t n_vocab = model.config().n_vocab;
  if (prompt_logits) *prompt_logits = *logits;
  std::vector<int32_t> out;
  int32_t next = argmax(logits->data() + (static_cast<int64_t>(tokens.size()) - 1) * n_vocab, n_vocab);
  for (size_t step = 0; step < steps; ++step) {
    out.push_back(next);
    if (step + 1 == steps) break;
    Result<std::vector<float>> l = (*session)->eval({&next, 1});
    EXPECT_TRUE(l) << l.error();
    if (!l) break;
    next = argmax(l->data(), n_vocab);
  }
  return out;
}

class CudaGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGolden, LogitsMatchReferenceAndGreedyMatchesCpu) {
  CADENZA_REQUIRE_CUDA();
  CADENZA_REQUIRE_SHARED();
  const std::string name = GetParam();
  const bool is_f16 = name.find("f16") != std::string::npos;
  const double bound = is_f16 ? kF16Bound : kQuantizedBound;
  const std::filesystem::path dir = test::shared_dir();
  std::ifstream golden_file(dir / "golden" / (name + ".json"));
  ASSERT_TRUE(golden_file) << "no golden file for " << name;
  const nlohmann::json golden = nlohmann::json::parse(golden_file);
  std::unique_ptr<kernels::Backend> gpu = cuda_backend();
  ASSERT_TRUE(gpu);
  std::unique_ptr<kernels::Backend> cpu = kernels::make_cpu_backend();
  const std::string path = (dir / "models" / (name + ".gguf")).string();
  Result<std::unique_ptr<Model>> gm = Model::open(path, *gpu);
  ASSERT_TRUE(gm) << gm.error();
  Result<std::unique_ptr<Model>> cm = Model::open(path, *cpu);
  ASSERT_TRUE(cm) << cm.error();
  const int64_t n_vocab = (*gm)->config().n_vocab;
  double max_diff = 0;
  int greedy_ref = 0, greedy_cpu = 0, total = 0;
  for (const nlohmann::json& c : golden["cases"]) {
    const std::vector<int32_t> tokens = c["tokens"].get<std::vector<int32_t>>();
    const std::vector<int32_t> ref_greedy = c["greedy"].get<std::vector<int32_t>>();
    std::vector<float> logits;
    const std::vector<int32_t> ours = greedy(**gm, tokens, ref_greedy.size(), &logits);
    const std::vector<int32_t> on_cpu = greedy(**cm, tokens, ref_greedy.size(), nullptr);
    ASSERT_EQ(logits.size(), tokens.size() * static_cast<size_t>(n_vocab));
    for (size_t pos = 0; pos < tokens.size(); ++pos) {
      for (const nlohmann::json& pair : c["topk"][pos]) {
        const int64_t id = pair[0].get<int64_t>();
        const double diff = std::abs(static_cast<double>(logits[pos * n_vocab + id]) - pair[1].get<double>());
        max_diff = std::max(max_diff, diff);
        EXPECT_LE(diff, bound) << "position " << pos << " token " << id;
      }
    }
    size_t m = 0;
    while (m < ours.size() && m < ref_greedy.size() && ours[m] == ref_greedy[m]) ++m;
    greedy_ref += static_cast<int>(m);
    m = 0;
    while (m < ours.size() && m < on_cpu.size() && ours[m] == on_cpu[m]) ++m;
    greedy_cpu += static_cast<int>(m);
    total += static_cast<int>(ref_greedy.size());
    if (is_f16) {
      EXPECT_EQ(ours, ref_greedy) << "greedy continuation vs the reference";
      EXPECT_EQ(ours, on_cpu) << "greedy continuation vs the cpu backend";
    }
  }
  std::cout << "[cuda golden] " << name << ": max |diff| top-k " << max_diff << " (bound " << bound
            << "); greedy prefix vs reference " << greedy_ref << "/" << total << ", vs cpu "
            << greedy_cpu << "/" << total << "\n";
}

INSTANTIATE_TEST_SUITE_P(SharedModels, CudaGolden, ::testing::ValuesIn(test::shared_model_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           for (char& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace cadenza::model
