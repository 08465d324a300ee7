// Golden tests of the families that ../shared has no model of (deepseek2, ...): each file in
// tests/model/golden/ holds a recipe (a `cadenza synth` preset, seed, weight type, the shared
// tokenizer to copy) and what the reference engine computed on the model that recipe makes
// (scripts/make_family_golden.py ran its refdump once; the model is synthesized again here, at
// test time, bit for bit the same). Checks, per file:
//  - every case alone: the reference's top-8 logits at every position within kF16Bound, the
//    reference's top-1 wherever it leads by more than the bound, the greedy continuation equal
//    up to the first step where the reference itself had a near-tie (margin under 2 x the
//    bound; two correct engines may continue differently after one);
//  - MoE near-ties: an expert (or expert group) choice whose margin is below the two engines'
//    rounding difference (~1e-3: the reference rounds attention inputs to f16) flips, and that
//    token's logits, and the later tokens' that attend to it, move by O(1). Measured, with
//    debug prints of the routing margins, on deepseek2-v3-small in f32: the first failing
//    position of a case is the token whose expert-group margin is 6e-4. So a file may allow a
//    measured fraction of its top-k logits over the bound (kAllowances), but never at the first
//    kStrictPositions positions of a case, and FirstPositionMatchesWithEmulatedReferenceRounding
//    holds position 0 to 2e-3 with the reference's rounding emulated: a wrong formula fails
//    there and at every position, not at a few percent;
//  - batched: a long case in one batch, token by token and in chunks bit for bit the same, and a
//    ragged batch of two cases with scattered block tables equal to each alone (so the batched
//    logits meet the golden bounds too).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "batch_checks.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "reference_emulation.h"
#include "shared_data.h"
#include "synth_recipe.h"

namespace cadenza::model {
namespace {

// The golden bound of the shared F16 models (golden_test.cpp). Measured on the family goldens
// (top-k, every ISA level): see the table in docs/models.md.
constexpr double kF16Bound = 2.5e-2;
constexpr int64_t kStrictPositions = 8;
// The files `type-<t>.json`: the `demo` preset (2 layers, llama) with every matrix in one of the
// low-bit types (tensor/README.md). The reference quantizes activations to 8-bit blocks inside its
// matmuls for them (Q8_K; Q8_0 for IQ4_NL and MXFP4), we mostly do not (types without a SIMD
// kernel multiply decoded weights with f32 activations), as for golden_test.cpp's quantized
// models. Measured max top-k diff over the ISA levels: q2_k 0.084-0.119, q3_k 0.094-0.101,
// iq4_nl 0.065-0.071, iq4_xs 0.082-0.091, mxfp4 0.064-0.080, iq2_xxs 0.085-0.090, iq2_xs
// 0.100-0.105, iq2_s 0.091-0.103, iq3_xxs 0.094-0.100, iq3_s 0.086-0.095, iq1_s 0.090-0.095,
// iq1_m 0.084-0.096 (0.108 / 0.098 before their kernels, with f32 activations); at most one case's greedy continuation differs per file. With the
// reference's activation rounding emulated, position 0 agrees to 6e-6 for every type: the
// decoders are the format's, bit for bit. 0.15 is 1.26x the largest.
constexpr double kQuantizedBound = 0.15;

// Per golden file: the fraction of top-k logits that may exceed kF16Bound after a routing
// near-tie, and how many cases' greedy continuations may differ before the reference's own
// near-tie (a flip during generation). Measured at every ISA level (scalar, avx2, avx512,
// avx512_vnni): see the comments; files not listed are strict.
struct Allowance {
  const char* name;
  double topk_fraction;
  int greedy_mismatches;
  double bound = kF16Bound;
  // FirstPositionMatchesWithEmulatedReferenceRounding's bound.
  double emulated_bound = 2e-3;
  // The first positions of every case held to the bound whatever topk_fraction says.
  int64_t strict_positions = kStrictPositions;
};
constexpr Allowance kAllowances[] = {
    // 3 layers, f16: top-k all within the bound (max 0.0089); greedy: the fib case flips an
    // expert group at step 10 (reference margin there 0.20), the other 5 match.
    {"deepseek2-v3-small", 0.0, 1},
    // 27 layers (the reference reads a model without a query latent only at V2-Lite's 26/27
    // layers), f32: 76-77 of 2912 top-k logits (2.6%) over the bound, first at positions 11, 23,
    // 30 and 222 of four cases; greedy: all 6 match.
    {"deepseek2-v2-lite-small", 0.05, 1},
    // 4 layers (2 with the 128-position window), f16 experts: 146 / 145 / 154 / 154 of 2912
    // top-k logits (at most 5.3%) over the bound at scalar / avx2 / avx512 / avx512_vnni (max
    // |diff| 0.957), at positions 20-21 of the Chinese case (31 tokens) and
    // from position 54 of the 265-token case on (a flip well before the window matters; later
    // tokens attend to it; not every position past 128 differs, so the window agrees); position 0
    // emulated 1.66e-3 (scalar, avx2) / 1.25e-3 (avx512*); greedy: all 6 match.
    {"gpt-oss-small", 0.06, 0},
    // The same model with f32 weights (the reference then multiplies in f32 too): 8 of 2912
    // top-k logits (0.27%) over the bound, all at positions 20-21 of one case (max 0.277), at
    // every level; every other position of every case within it, greedy 6 of 6, position 0
    // emulated 3.4e-4. A local difference that does not spread is what an expert chosen
    // differently at a near-tie of the router gives; a wrong formula would show everywhere. The
    // f16 file's larger share comes on top of that from the reference's f16 rounding.
    {"gpt-oss-small-f32", 0.005, 0},
    // The qwen35 hybrid (4 Gated DeltaNet layers, 2 gated attention layers, f16): top-k max 0.0039
    // (0 over the bound), greedy 6 of 6. The emulated rounding does not bring position 0 closer
    // here (0.016 emulated; 0.0045 with the linear layers' attn_qkv input left unrounded): the
    // reference rounds differently around its linear-attention layers, which the emulation does
    // not model. Measured with the value heads sharing key heads h % group_count; the grouped
    // h / ratio mapping gives 6.7 (and 0.0020 with as many key heads as value heads).
    {"qwen35-small", 0.0, 0, kF16Bound, 0.02},
    // qwen35moe: the same hybrid layers with 16 routed experts (4 used, renormalised) and a gated
    // shared expert, f16: 72 of 2352 top-k logits (3.1%) over the bound, all in one case (24
    // tokens) from position 16 on (0.45 there, 0.09-0.54 after; every other position of every
    // case at most 0.015): a router near-tie at position 16 that later positions inherit through
    // attention and the recurrent state; greedy: that case differs, the other 5 match. Without
    // the renormalisation every position is off (2333 of 2352, max 4.0). Position 0 emulated:
    // 0.096, worse than unemulated (at most 0.012): the emulated rounding does not model the
    // reference around the linear-attention and expert layers (see qwen35-small), so the strict
    // first positions of every case carry the check here.
    {"qwen35moe-small", 0.035, 1, kF16Bound, 0.1},
    // granitehybrid: 6 layers (4 Mamba-2 in 2 groups, 2 attention without RoPE), f16: 33 of
    // 2912 top-k logits (1.1%) over the bound, max 0.111, all in the 265-token case (a sentence of
    // 22 tokens repeated) at the same few tokens of each repetition, growing with it (positions
    // 45, 67, 89, ...: 0.065, 0.092, ..., 0.111; the same tokens' first occurrence 0.014-0.017;
    // everywhere else at most 0.02), at every level; greedy 6 of 6 (11 of 96 steps compared).
    // Rounding, not a formula: with the reference's f16 rounding of matmul inputs and K/V
    // emulated over the whole case, max 0.026 and 1 over; the alternatives a wrong formula would
    // be (head h reading group h % groups, one norm over the whole inner width, the norm before
    // the z gate) are 2.9-3.7 off nearly everywhere. Position 0 emulated: 0.0035 (unemulated
    // 0.0022): as for qwen35, the emulation does not model the reference around its recurrent
    // layers. The same model in f32 (granitehybrid-small-f32, strict): max 0.00105 over all 2912,
    // position 0 emulated 1.7e-5.
    {"granitehybrid-small", 0.02, 0, kF16Bound, 0.005},
    // granitehybrid-moe: the same layers with 16 routed experts of 64 (4 used, renormalised)
    // and an ungated shared expert, f32 weights (the reference then multiplies in f32): position
    // 0 with the emulated rounding 5.0e-6, so the Mamba-2, attention and expert formulas are the
    // reference's; 4 of 2912 top-k logits (0.14%) over the bound, all at position 6 of the emoji
    // case (max 0.071), where layer 4's router has a near-tie (its 4th and 5th logits 6.7e-4
    // apart, measured with debug prints): an expert chosen differently there, and only there, so
    // that case's strict positions stop before it. Greedy 6 of 6 (15 of 96 steps compared). In
    // f16 (not committed) the reference's f16 rounding of the router's input flips more such
    // near-ties: 62 over (max 0.115), at positions 1-7 of two cases too; 47, all past position
    // 40, with that rounding emulated.
    {"granitehybrid-moe-small-f32", 0.002, 0, kF16Bound, 2e-3, 6},
    // llama4: 4 layers (layer 3 NoPE), experts in layers 1 and 3 (16, one per token, weighted at
    // their input, an ungated shared expert), dense layers 0 and 2, unweighted Q/K norm, f16:
    // top-k max 0.0035, 0 of 2392 over the bound, greedy 6 of 6 (19 of 96 steps compared);
    // position 0 emulated 0.0025 (unemulated, the strict bound holds everywhere).
    {"llama4-small", 0.0, 0, kF16Bound, 3e-3},
    // Strict files, for the record: glm4moe-small (3 decoder layers + the skipped nextn layer,
    // f16): top-k max 0.0059 at every level, 0 over the bound, greedy 6 of 6; position 0 with the
    // emulated rounding 4e-4 (avx2) to 1.1e-3 (scalar), from the expert layers (the dense layer
    // alone: 5e-6) and seed- and level-dependent (2 layers, seed 8: 4e-6 at scalar and avx2;
    // seed 9: 5e-4 at scalar, 4e-6 at avx2), so a rounding edge rather than a formula.
    // The dense families, f16, strict at every level: gemma3-small top-k max 0.0043 (position 0
    // emulated 4.8e-6 at avx2, 1.1e-3 at avx512*), phi3-small 0.0046 (3.2e-4 .. 1.1e-3),
    // mistral3-small 0.0065 (4.4e-6 .. 6.8e-4), granite-small 1.4e-4 (4.3e-6); greedy 6 of 6
    // (phi3 and mistral3 compared over 25 and 24 of 96 steps: the reference's own near-ties).
};

Allowance allowance_of(const std::string& name) {
  for (const Allowance& a : kAllowances) {
    if (name == a.name) return a;
  }
  if (name.rfind("type-", 0) == 0) return {"", 0.0, 1, kQuantizedBound};
  return {"", 0.0, 0};
}

std::vector<std::string> golden_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(CADENZA_FAMILY_GOLDEN_DIR)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

nlohmann::json read_golden(const std::string& name) {
  std::ifstream in(std::filesystem::path(CADENZA_FAMILY_GOLDEN_DIR) / (name + ".json"));
  EXPECT_TRUE(in) << name;
  return nlohmann::json::parse(in);
}

// The recipe's model, written once per test process (the three tests of a file share it; the IQ
// quantizers take a second or two per file).
std::string synthesize(const std::string& name, const nlohmann::json& recipe) {
  return test::synthesize_recipe(name, recipe);
}

int32_t argmax(const float* logits, int64_t n) {
  return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
}

class FamilyGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyGoldenTest, LogitsAndGreedyMatchReference) {
  CADENZA_REQUIRE_SHARED();
  const nlohmann::json golden = read_golden(GetParam());
  const std::string path = synthesize(GetParam(), golden["recipe"]);
  ASSERT_FALSE(path.empty());
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  Result<std::unique_ptr<Model>> model = Model::open(path, *backend);
  ASSERT_TRUE(model) << model.error();
  const int64_t n_vocab = (*model)->config().n_vocab;

  const Allowance allowed = allowance_of(GetParam());
  double max_diff = 0;
  int greedy_compared = 0, greedy_total = 0, greedy_mismatches = 0;
  int64_t topk_checked = 0, topk_over = 0;
  for (const nlohmann::json& c : golden["cases"]) {
    SCOPED_TRACE(c["prompt"].get<std::string>().substr(0, 40));
    ASSERT_EQ(c["n_vocab"].get<int64_t>(), n_vocab);
    const std::vector<int32_t> tokens = c["tokens"].get<std::vector<int32_t>>();
    const std::vector<int32_t> greedy = c["greedy"].get<std::vector<int32_t>>();
    const std::vector<double> margins = c["greedy_margin"].get<std::vector<double>>();
    const int64_t n = static_cast<int64_t>(tokens.size());
    SessionOptions options;
    options.max_tokens = static_cast<int32_t>(n + greedy.size() + 1);
    Result<std::unique_ptr<Session>> session = Session::create(**model, options);
    ASSERT_TRUE(session) << session.error();
    Result<std::vector<float>> logits = (*session)->eval_all(tokens);
    ASSERT_TRUE(logits) << logits.error();
    for (int64_t pos = 0; pos < n; ++pos) {
      const float* ours = logits->data() + pos * n_vocab;
      const nlohmann::json& ref = c["topk"][static_cast<size_t>(pos)];
      const bool strict = allowed.topk_fraction == 0 || pos < allowed.strict_positions;
      bool over = false;
      for (const nlohmann::json& pair : ref) {
        const double diff = std::abs(ours[pair[0].get<int64_t>()] - pair[1].get<double>());
        max_diff = std::max(max_diff, diff);
        ++topk_checked;
        if (diff > allowed.bound) {
          ++topk_over;
          over = true;
        }
        if (strict) {
          EXPECT_LE(diff, allowed.bound) << "position " << pos << " token " << pair[0];
        }
      }
      if (!over && ref[0][1].get<double>() - ref[1][1].get<double>() > allowed.bound) {
        EXPECT_EQ(argmax(ours, n_vocab), ref[0][0].get<int32_t>()) << "position " << pos;
      }
    }
    // Greedy: equal up to the reference's first near-tie (the steps before it).
    size_t until = 0;
    while (until < greedy.size() && margins[until] >= 2 * allowed.bound) ++until;
    std::vector<int32_t> generated;
    int32_t next = argmax(logits->data() + (n - 1) * n_vocab, n_vocab);
    for (size_t step = 0; step < until; ++step) {
      generated.push_back(next);
      if (step + 1 == until) break;
      Result<std::vector<float>> step_logits = (*session)->eval({&next, 1});
      ASSERT_TRUE(step_logits) << step_logits.error();
      next = argmax(step_logits->data(), n_vocab);
    }
    if (generated != std::vector<int32_t>(greedy.begin(), greedy.begin() + until)) {
      ++greedy_mismatches;
    }
    greedy_compared += static_cast<int>(until);
    greedy_total += static_cast<int>(greedy.size());
  }
  EXPECT_LE(topk_over, allowed.topk_fraction * topk_checked)
      << topk_over << " of " << topk_checked << " top-k logits over " << allowed.bound;
  EXPECT_LE(greedy_mismatches, allowed.greedy_mismatches);
  std::cout << "[family golden] " << GetParam() << ": max |diff| top-k " << max_diff << " (bound "
            << allowed.bound << "; " << topk_over << " of " << topk_checked
            << " over it); greedy compared over " << greedy_compared << "/" << greedy_total
            << " steps (up to the reference's near-ties), " << greedy_mismatches
            << " case(s) differ\n";
}

TEST_P(FamilyGoldenTest, FirstPositionMatchesWithEmulatedReferenceRounding) {
  CADENZA_REQUIRE_SHARED();
  const double kBound = allowance_of(GetParam()).emulated_bound;
  const nlohmann::json golden = read_golden(GetParam());
  const std::string path = synthesize(GetParam(), golden["recipe"]);
  ASSERT_FALSE(path.empty());
  test::ReferenceEmulatingBackend backend(kernels::make_cpu_backend({.n_threads = 2}), true);
  Result<std::unique_ptr<Model>> model = Model::open(path, backend);
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
  std::cout << "[family golden, emulated] " << GetParam() << ": position 0 max |diff| " << max_diff
            << " (bound " << kBound << ")\n";
}

TEST_P(FamilyGoldenTest, BatchedMatchesAlone) {
  CADENZA_REQUIRE_SHARED();
  const nlohmann::json golden = read_golden(GetParam());
  const std::string path = synthesize(GetParam(), golden["recipe"]);
  ASSERT_FALSE(path.empty());
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 3});
  Result<std::unique_ptr<Model>> model = Model::open(path, *backend);
  ASSERT_TRUE(model) << model.error();
  const nlohmann::json& cases = golden["cases"];
  std::vector<int32_t> long_case = cases.back()["tokens"].get<std::vector<int32_t>>();
  long_case.resize(std::min<size_t>(long_case.size(), 48));
  const std::vector<float> one_batch = test::eval_all(**model, long_case, 512);
  EXPECT_TRUE(test::bitwise_equal(one_batch, test::eval_all(**model, long_case, 1))) << "token by token";
  EXPECT_TRUE(test::bitwise_equal(one_batch, test::eval_all(**model, long_case, 7))) << "chunks of 7";
  test::check_ragged_batch(**model, long_case, cases[3]["tokens"].get<std::vector<int32_t>>());
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyGoldenTest, ::testing::ValuesIn(golden_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           for (char& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace cadenza::model
