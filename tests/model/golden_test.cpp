// Golden tests: for every model in ../shared/models, our logits against the reference
// implementation's (../shared/golden/<model>.json, see ../shared/README.md).
//
// Bounds on max |our logit - reference logit| over the 8 reference top-k tokens at every prompt
// position and over all logits of case 0's last position (logits span about +-5 on these models):
//  - F16 models: 2e-2 (measured: 2.5e-3 .. 1.7e-2, the largest on qwen3moe).
//  - Quantized models (small-llama-spm-{Q8_0,Q4_0,Q4_K_M}): kQuantizedBound below. The reference
//    quantizes activations to 8-bit blocks inside every matmul (Q8_0 for Q4_0/Q8_0 weights, Q8_K
//    for K-quants) and keeps K/V in f16; we multiply dequantized weights with f32 activations and
//    keep K/V in f32. FirstPositionMatchesWithEmulatedReferenceRounding shows that this is the
//    whole story where attention does not mix tokens: emulating that rounding, position 0 agrees
//    to 4e-6 (the golden files' printed precision).
// Top-1: wherever the reference's top-1 leads its runner-up by more than the bound, our argmax
// must be the same token. Greedy: the 16-token greedy continuation must be identical for F16
// models; for quantized models the matching prefix length is printed (an early flip of a near-tie
// changes the rest of the continuation).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"
#include "reference_emulation.h"
#include "shared_data.h"

namespace cadenza::model {
namespace {

constexpr double kF16Bound = 2e-2;
// Measured max |diff| (top-k, last logits): Q8_0 0.051, 0.062; Q4_0 0.048, 0.059; Q4_K_M 0.067,
// 0.084 (8-bit activation rounding accumulated over 2 layers and the 256-wide output projection).
// 0.12 keeps about 1.4x headroom for reduction-order changes (SIMD kernels) while a real bug shows
// up as errors of order 1.
constexpr double kQuantizedBound = 0.12;

std::vector<std::string> shared_models() {
  std::vector<std::string> names;
  const std::filesystem::path dir = test::shared_dir();
  if (!dir.empty() && std::filesystem::is_directory(dir / "models")) {
    for (const auto& entry : std::filesystem::directory_iterator(dir / "models")) {
      if (entry.path().extension() == ".gguf") names.push_back(entry.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) names.push_back("none");  // one test that reports the skip
  return names;
}

int32_t argmax(const float* logits, int64_t n) {
  return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
}

struct GoldenStats {
  double max_topk_diff = 0;
  double max_last_diff = 0;
  int top1_checked = 0;
  int greedy_matched = 0;  // tokens of the greedy prefix equal to the reference's, all cases
  int greedy_total = 0;
  double seconds = 0;
};

// Runs every golden case of `name` on `backend`, checking logits against `bound` and (when
// require_greedy) the greedy continuation for equality.
void run_golden(const std::string& name, kernels::Backend& backend, double bound,
                bool require_greedy, GoldenStats& stats) {
  const std::filesystem::path dir = test::shared_dir();
  const std::filesystem::path model_path = dir / "models" / (name + ".gguf");
  const std::filesystem::path golden_path = dir / "golden" / (name + ".json");
  ASSERT_TRUE(std::filesystem::exists(golden_path)) << "no golden file for " << name;
  std::ifstream golden_file(golden_path);
  const nlohmann::json golden = nlohmann::json::parse(golden_file);

  const auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<Model>> model = Model::open(model_path.string(), backend);
  ASSERT_TRUE(model) << model.error();
  const int64_t n_vocab = (*model)->config().n_vocab;

  for (size_t ci = 0; ci < golden["cases"].size(); ++ci) {
    const nlohmann::json& c = golden["cases"][ci];
    SCOPED_TRACE("case " + std::to_string(ci) + ": " + c["prompt"].get<std::string>().substr(0, 40));
    ASSERT_EQ(c["n_vocab"].get<int64_t>(), n_vocab);
    const std::vector<int32_t> tokens = c["tokens"].get<std::vector<int32_t>>();
    const std::vector<int32_t> greedy = c["greedy"].get<std::vector<int32_t>>();
    const int64_t n = static_cast<int64_t>(tokens.size());

    SessionOptions options;
    options.max_tokens = static_cast<int32_t>(n + greedy.size() + 1);
    Result<std::unique_ptr<Session>> session = Session::create(**model, options);
    ASSERT_TRUE(session) << session.error();
    Result<std::vector<float>> logits = (*session)->eval_all(tokens);
    ASSERT_TRUE(logits) << logits.error();

    const nlohmann::json& topk = c["topk"];
    ASSERT_EQ(static_cast<int64_t>(topk.size()), n);
    for (int64_t pos = 0; pos < n; ++pos) {
      const float* ours = logits->data() + pos * n_vocab;
      const nlohmann::json& ref = topk[static_cast<size_t>(pos)];
      for (const nlohmann::json& pair : ref) {
        const int64_t id = pair[0].get<int64_t>();
        const double diff = std::abs(static_cast<double>(ours[id]) - pair[1].get<double>());
        stats.max_topk_diff = std::max(stats.max_topk_diff, diff);
        EXPECT_LE(diff, bound) << "position " << pos << " token " << id;
      }
      const double lead = ref[0][1].get<double>() - ref[1][1].get<double>();
      if (lead > bound) {
        ++stats.top1_checked;
        EXPECT_EQ(argmax(ours, n_vocab), ref[0][0].get<int32_t>()) << "position " << pos;
      }
    }
    if (c.contains("last_logits")) {
      const std::vector<double> last = c["last_logits"].get<std::vector<double>>();
      ASSERT_EQ(static_cast<int64_t>(last.size()), n_vocab);
      const float* ours = logits->data() + (n - 1) * n_vocab;
      double max_diff = 0;
      for (int64_t i = 0; i < n_vocab; ++i) {
        max_diff = std::max(max_diff, std::abs(static_cast<double>(ours[i]) - last[i]));
      }
      stats.max_last_diff = std::max(stats.max_last_diff, max_diff);
      EXPECT_LE(max_diff, bound);
    }

    // Greedy continuation: argmax, feed it back, 16 times.
    std::vector<int32_t> generated;
    int32_t next = argmax(logits->data() + (n - 1) * n_vocab, n_vocab);
    for (size_t step = 0; step < greedy.size(); ++step) {
      generated.push_back(next);
      if (step + 1 == greedy.size()) break;
      Result<std::vector<float>> step_logits = (*session)->eval({&next, 1});
      ASSERT_TRUE(step_logits) << step_logits.error();
      next = argmax(step_logits->data(), n_vocab);
    }
    int matched = 0;
    while (matched < static_cast<int>(greedy.size()) && generated[matched] == greedy[matched]) ++matched;
    stats.greedy_matched += matched;
    stats.greedy_total += static_cast<int>(greedy.size());
    if (require_greedy) {
      EXPECT_EQ(generated, greedy);
    }
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void report(const std::string& label, const std::string& name, double bound, const GoldenStats& s) {
  std::cout << "[" << label << "] " << name << ": max |diff| top-k " << s.max_topk_diff
            << ", last logits " << s.max_last_diff << " (bound " << bound << "); top-1 checked at "
            << s.top1_checked << " positions; greedy prefix match " << s.greedy_matched << "/"
            << s.greedy_total << " (" << s.seconds << " s)\n";
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, LogitsAndGreedyMatchReference) {
  CADENZA_REQUIRE_SHARED();
  const std::string name = GetParam();
  const bool is_f16 = name.find("f16") != std::string::npos;
  const double bound = is_f16 ? kF16Bound : kQuantizedBound;
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend();
  GoldenStats stats;
  run_golden(name, *backend, bound, /*require_greedy=*/is_f16, stats);
  report("golden", name, bound, stats);
  RecordProperty("max_topk_diff", std::to_string(stats.max_topk_diff));
  RecordProperty("max_last_logits_diff", std::to_string(stats.max_last_diff));
  RecordProperty("greedy_matched",
                 std::to_string(stats.greedy_matched) + "/" + std::to_string(stats.greedy_total));
}

// Position 0 of every case (the first token attends only to itself, so no softmax mixing is
// involved) with activations rounded as the reference rounds them and K/V kept in f16
// (reference_emulation.h). Measured: 4e-6 for most models, i.e. the printed precision of the
// golden files; at most 1.2e-3 (the trained licenses model, qwen3). This pins down weight
// decoding, matmuls, norms, biases, the FFN/MoE and the output head bit for bit up to rounding;
// what remains at later positions comes from the reference's attention numerics, which we do not
// emulate.
TEST_P(GoldenTest, FirstPositionMatchesWithEmulatedReferenceRounding) {
  CADENZA_REQUIRE_SHARED();
  constexpr double kBound = 2e-3;
  const std::string name = GetParam();
  const std::filesystem::path dir = test::shared_dir();
  std::ifstream golden_file(dir / "golden" / (name + ".json"));
  ASSERT_TRUE(golden_file) << "no golden file for " << name;
  const nlohmann::json golden = nlohmann::json::parse(golden_file);
  test::ReferenceEmulatingBackend backend(kernels::make_cpu_backend(), /*f16_kv=*/true);
  Result<std::unique_ptr<Model>> model = Model::open((dir / "models" / (name + ".gguf")).string(), backend);
  ASSERT_TRUE(model) << model.error();
  double max_diff = 0;
  for (const nlohmann::json& c : golden["cases"]) {
    SessionOptions options;
    options.max_tokens = 1;
    Result<std::unique_ptr<Session>> session = Session::create(**model, options);
    ASSERT_TRUE(session) << session.error();
    const int32_t first = c["tokens"][0].get<int32_t>();
    Result<std::vector<float>> logits = (*session)->eval({&first, 1});
    ASSERT_TRUE(logits) << logits.error();
    for (const nlohmann::json& pair : c["topk"][0]) {
      const double diff = std::abs((*logits)[pair[0].get<size_t>()] - pair[1].get<double>());
      max_diff = std::max(max_diff, diff);
      EXPECT_LE(diff, kBound) << "token " << pair[0];
    }
  }
  std::cout << "[golden-emulated] " << name << ": position 0 max |diff| " << max_diff
            << " with the reference's activation rounding and f16 K/V (bound " << kBound << ")\n";
}

INSTANTIATE_TEST_SUITE_P(SharedModels, GoldenTest, ::testing::ValuesIn(shared_models()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           for (char& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace cadenza::model
