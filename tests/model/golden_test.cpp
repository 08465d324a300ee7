// Golden tests: for every model in ../shared/models, our logits against the reference
// implementation's (../shared/golden/<model>.json, see ../shared/README.md).
//
// Each model runs with the default F16 KV cache (LogitsAndGreedyMatchReference), with an F32 KV
// cache (same bounds) and with a Q8_0 KV cache (its own bound, below).
//
// Bounds on max |our logit - reference logit| over the 8 reference top-k tokens at every prompt
// position and over all logits of case 0's last position (logits span about +-5 on these models):
//  - F16 models: kF16Bound (measured, top-k / last logits, at every ISA level: f16 KV 2.4e-3 ..
//    1.99e-2, f32 KV 2.5e-3 .. 1.7e-2; the largest on qwen3moe either way).
//  - Quantized models (small-llama-spm-{Q8_0,Q4_0,Q4_K_M}): kQuantizedBound below. The reference
//    quantizes activations to 8-bit blocks inside every matmul (Q8_0 for Q4_0/Q8_0 weights, Q8_K
//    for K-quants) and keeps K/V in f16; we multiply dequantized weights with f32 activations and
//    compute attention in f32 on K/V kept in f16 (default) or f32. The reference also rounds q
//    (and the softmax weights) to f16 for its f16 K/V products, which we do not, so storing K/V
//    in f16 alone moves the diffs only a little, mostly down (see kF16Bound).
//    FirstPositionMatchesWithEmulatedReferenceRounding shows that activation rounding is the
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

// Measured max top-k |diff| with f16 KV (f32 KV): licenses 0.0045 (0.0052), tiny-llama 0.0024
// (0.0025), llama3 0.0071 (0.0074), mixtral 0.0039 (0.0027), qwen2 0.0118 (0.0133), qwen3 0.0083
// (0.0086), qwen3moe 0.0199 (0.0169). qwen3moe with f16 K/V sits at the old 0.02, hence 0.025.
constexpr double kF16Bound = 2.5e-2;
// Measured max |diff| (top-k, last logits) with f32 KV: Q8_0 0.051-0.053, 0.059-0.062; Q4_0
// 0.048-0.060, 0.059-0.071; Q4_K_M 0.063-0.067, 0.084-0.103. With f16 KV: Q8_0 0.042-0.051,
// 0.079; Q4_0 0.040-0.048, 0.077; Q4_K_M 0.061-0.067, 0.091 (8-bit activation rounding
// accumulated over 2 layers and the 256-wide output projection; ranges over the ISA levels).
// 0.12 keeps headroom for reduction-order changes (SIMD kernels) while a real bug shows up as
// errors of order 1.
constexpr double kQuantizedBound = 0.12;
// Q8_0 K/V (LogitsCloseToReferenceWithQ8KvCache; only models with head dims that are multiples
// of 32: licenses, qwen3, qwen3moe, small-llama-*). Measured max |diff| (top-k, last logits) at
// every ISA level: licenses 0.091, 0.036; qwen3 0.086, 0.092; Q8_0 0.051-0.056, 0.066-0.088; Q4_0
// 0.048-0.055, 0.066-0.081; Q4_K_M 0.068-0.076, 0.086-0.114. 0.15 is 1.3x the largest.
constexpr double kQ8KvBound = 0.15;
// MoE models under Q8_0 K/V: the K/V rounding flips near-tied expert choices at a few positions,
// which moves those logits by O(1) (qwen3moe: 16 of 2352 top-k logits over kQ8KvBound, up to 2.1;
// 1 of 232 top-1 tokens; greedy continuations all equal). Up to 2% of either may be off.
constexpr double kQ8KvMoeOutliers = 0.02;


int32_t argmax(const float* logits, int64_t n) {
  return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
}

struct GoldenStats {
  double max_topk_diff = 0;
  double max_last_diff = 0;
  int top1_checked = 0;
  int top1_mismatched = 0;
  int topk_checked = 0;  // (position, token) pairs compared
  int topk_over = 0;     // of which over the bound
  int greedy_matched = 0;  // tokens of the greedy prefix equal to the reference's, all cases
  int greedy_total = 0;
  double seconds = 0;
};

// Runs every golden case of `name` on `backend` with a KV cache of `kv_type`, checking logits
// against `bound` and (when require_greedy) the greedy continuation for equality. With
// max_outlier_fraction > 0, top-k logits over the bound and top-1 mismatches are counted instead
// of failing one by one, and at most that fraction of each may occur (MoE models under q8 KV).
void run_golden(const std::string& name, kernels::Backend& backend, DType kv_type, double bound,
                bool require_greedy, GoldenStats& stats, double max_outlier_fraction = 0) {
  const bool strict = max_outlier_fraction == 0;
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
    options.kv_type = kv_type;
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
        ++stats.topk_checked;
        if (diff > bound) ++stats.topk_over;
        if (strict) {
          EXPECT_LE(diff, bound) << "position " << pos << " token " << id;
        }
      }
      const double lead = ref[0][1].get<double>() - ref[1][1].get<double>();
      if (lead > bound) {
        ++stats.top1_checked;
        if (argmax(ours, n_vocab) != ref[0][0].get<int32_t>()) ++stats.top1_mismatched;
        if (strict) {
          EXPECT_EQ(argmax(ours, n_vocab), ref[0][0].get<int32_t>()) << "position " << pos;
        }
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
      if (strict) {
        EXPECT_LE(max_diff, bound);
      }
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
  if (!strict) {
    EXPECT_LE(stats.topk_over, max_outlier_fraction * stats.topk_checked)
        << stats.topk_over << " of " << stats.topk_checked << " top-k logits over " << bound;
    EXPECT_LE(stats.top1_mismatched, max_outlier_fraction * stats.top1_checked)
        << stats.top1_mismatched << " of " << stats.top1_checked << " top-1 tokens differ";
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void report(const std::string& label, const std::string& name, double bound, const GoldenStats& s) {
  std::cout << "[" << label << "] " << name << ": max |diff| top-k " << s.max_topk_diff
            << ", last logits " << s.max_last_diff << " (bound " << bound << "; " << s.topk_over
            << " of " << s.topk_checked << " top-k over it); top-1 checked at " << s.top1_checked
            << " positions (" << s.top1_mismatched << " differ); greedy prefix match " << s.greedy_matched << "/"
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
  run_golden(name, *backend, DType::F16, bound, /*require_greedy=*/is_f16, stats);
  report("golden, f16 KV", name, bound, stats);
  RecordProperty("max_topk_diff", std::to_string(stats.max_topk_diff));
  RecordProperty("max_last_logits_diff", std::to_string(stats.max_last_diff));
  RecordProperty("greedy_matched",
                 std::to_string(stats.greedy_matched) + "/" + std::to_string(stats.greedy_total));
}

// The F32 KV cache (--kv-cache-type f32): the same bounds and checks.
TEST_P(GoldenTest, LogitsAndGreedyMatchReferenceWithF32KvCache) {
  CADENZA_REQUIRE_SHARED();
  const std::string name = GetParam();
  const bool is_f16 = name.find("f16") != std::string::npos;
  const double bound = is_f16 ? kF16Bound : kQuantizedBound;
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend();
  GoldenStats stats;
  run_golden(name, *backend, DType::F32, bound, /*require_greedy=*/is_f16, stats);
  report("golden, f32 KV", name, bound, stats);
}

// The Q8_0 KV cache (--kv-cache-type q8): K/V rounded to 8 bits per value (a scale per 32) move
// the logits further from the reference (which keeps f16 K/V), so the bound is kQ8KvBound and
// the greedy continuation is reported, not required. Models whose head dims are not multiples of
// 32 cannot use it: for them the test checks that KvCache::create refuses with a clear error
// (a pass: the refusal is the behaviour; not a skip, which CI allows only for missing data or
// hardware).
TEST_P(GoldenTest, LogitsCloseToReferenceWithQ8KvCache) {
  CADENZA_REQUIRE_SHARED();
  const std::string name = GetParam();
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend();
  bool moe = false;
  {
    const std::filesystem::path path = test::shared_dir() / "models" / (name + ".gguf");
    Result<std::unique_ptr<Model>> model = Model::open(path.string(), *backend);
    ASSERT_TRUE(model) << model.error();
    const ModelConfig& config = (*model)->config();
    moe = config.n_experts > 0;
    if (config.head_dim_k % 32 != 0 || config.head_dim_v % 32 != 0) {
      Result<std::unique_ptr<KvCache>> kv =
          (*model)->create_kv_cache({.num_blocks = 1, .block_size = 16, .type = DType::Q8_0});
      ASSERT_FALSE(kv);
      EXPECT_NE(kv.error().find("multiples of 32"), std::string::npos) << kv.error();
      std::cout << "[q8 KV] " << name << " has head dims " << config.head_dim_k << "/"
                << config.head_dim_v << ": a q8 KV cache is refused (multiples of 32), as checked\n";
      return;
    }
  }
  GoldenStats stats;
  run_golden(name, *backend, DType::Q8_0, kQ8KvBound, /*require_greedy=*/false, stats,
             moe ? kQ8KvMoeOutliers : 0.0);
  report("golden, q8 KV", name, kQ8KvBound, stats);
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

INSTANTIATE_TEST_SUITE_P(SharedModels, GoldenTest, ::testing::ValuesIn(test::shared_model_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           for (char& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace cadenza::model
