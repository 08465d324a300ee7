// Long-context goldens (tests/model/golden/long/*.json, scripts/make_longctx_golden.py): the
// reference engine's top-8 log-probabilities at a few positions of a prompt thousands of tokens
// long (the first `chars` characters of a ../shared text), on a model synthesized from the file's
// recipe. Checks that what ours computes there (RoPE at high positions, attention over thousands
// of positions through flash-decoding splits, a long prefill in 512-token steps) agrees with the
// reference:
//  - our tokenizer gives the reference's token ids (count and FNV-1a hash);
//  - at each position, our log-probability (log-softmax over the whole vocabulary, in double) of
//    each of the reference's top 8 tokens within kBound of the reference's, and our top token the
//    reference's wherever the reference's leads by more than 2 x kBound.
// Files marked "ci" run in ctest (a 2-layer model, ~4k tokens); the others (the full 24-layer
// Qwen2.5-0.5B shape at 16k tokens: minutes on 2 cores) are a DISABLED test that
// scripts/longctx_check.sh runs (--gtest_also_run_disabled_tests).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"
#include "shared_data.h"
#include "synth_recipe.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::model {
namespace {

// The F16 golden bound of the logits (family_golden_test.cpp's kF16Bound), here on log-probs.
constexpr double kBound = 2.5e-2;

std::filesystem::path long_dir() { return std::filesystem::path(CADENZA_FAMILY_GOLDEN_DIR) / "long"; }

// The files with "ci" equal to `ci`, by stem, sorted.
std::vector<std::string> long_goldens(bool ci) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(long_dir())) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    if (nlohmann::json::parse(in).value("ci", false) == ci) names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The first n code points of a UTF-8 text (Python's text[:n], which the script used).
std::string first_code_points(const std::string& text, int64_t n) {
  size_t i = 0;
  for (int64_t seen = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && seen++ == n) break;
  }
  return text.substr(0, i);
}

std::string fnv1a(const std::vector<int32_t>& ids) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int32_t id : ids) {
    const auto u = static_cast<uint32_t>(id);
    for (int b = 0; b < 4; ++b) h = (h ^ ((u >> (8 * b)) & 0xFF)) * 0x100000001b3ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void check_long_golden(const std::string& name) {
  std::ifstream in(long_dir() / (name + ".json"));
  ASSERT_TRUE(in) << name;
  const nlohmann::json golden = nlohmann::json::parse(in);
  const std::string path = test::synthesize_recipe("long-" + name, golden["recipe"]);
  ASSERT_FALSE(path.empty());
  std::ifstream text_in(test::shared_dir() / golden["text"]["file"].get<std::string>(), std::ios::binary);
  ASSERT_TRUE(text_in) << golden["text"].dump();
  std::stringstream text;
  text << text_in.rdbuf();
  const std::string prompt = first_code_points(text.str(), golden["text"]["chars"].get<int64_t>());

  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file) << file.error();
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tokenizer) << tokenizer.error();
  const std::vector<int32_t> tokens = (*tokenizer)->encode(prompt, true, false);
  ASSERT_EQ(static_cast<int64_t>(tokens.size()), golden["n_tokens"].get<int64_t>());
  ASSERT_EQ(fnv1a(tokens), golden["tokens_fnv1a"].get<std::string>()) << "token ids differ";

  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  Result<std::unique_ptr<Model>> model = Model::open(path, *backend);
  ASSERT_TRUE(model) << model.error();
  const int64_t n_vocab = (*model)->config().n_vocab;
  Result<std::unique_ptr<Session>> session =
      Session::create(**model, {.max_tokens = static_cast<int32_t>(tokens.size() + 8)});
  ASSERT_TRUE(session) << session.error();

  int64_t done = 0;
  for (const nlohmann::json& at : golden["positions"]) {
    const int64_t pos = at["position"].get<int64_t>();
    ASSERT_GE(pos, done) << "positions must ascend";
    Result<std::vector<float>> logits = (*session)->eval(
        std::span<const int32_t>(tokens).subspan(static_cast<size_t>(done), static_cast<size_t>(pos + 1 - done)));
    ASSERT_TRUE(logits) << logits.error();
    done = pos + 1;
    const float* l = logits->data();
    const double mx = *std::max_element(l, l + n_vocab);
    double sum = 0;
    for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(l[i]) - mx);
    const double lse = mx + std::log(sum);
    const nlohmann::json& top = at["top_logprobs"];
    double max_diff = 0;
    for (const nlohmann::json& pair : top) {
      const double ours = l[pair[0].get<int64_t>()] - lse;
      const double diff = std::abs(ours - pair[1].get<double>());
      max_diff = std::max(max_diff, diff);
      EXPECT_LE(diff, kBound) << "position " << pos << " token " << pair[0] << ": ours " << ours
                              << ", reference " << pair[1];
    }
    if (top.size() >= 2 && top[0][1].get<double>() - top[1][1].get<double>() > 2 * kBound) {
      EXPECT_EQ(std::max_element(l, l + n_vocab) - l, top[0][0].get<int64_t>()) << "position " << pos;
    }
    // The measured agreement, for docs and reports.
    std::cout << "[ long golden ] " << name << " position " << pos << " of " << tokens.size()
              << ": max |log-prob diff| over the reference's top " << top.size() << " = " << max_diff
              << "\n";
  }
}

class LongContextGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(LongContextGolden, LogProbsMatchReference) {
  CADENZA_REQUIRE_SHARED();
  check_long_golden(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Ci, LongContextGolden, ::testing::ValuesIn(long_goldens(true)),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           for (char& c : s) if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

// The long files (minutes each): scripts/longctx_check.sh.
// CADENZA_LONG_GOLDEN=TEXT checks only the files whose name contains TEXT (each takes minutes).
TEST(LongContextGoldenFull, DISABLED_LogProbsMatchReference) {
  CADENZA_REQUIRE_SHARED();
  const char* only = std::getenv("CADENZA_LONG_GOLDEN");
  int checked = 0;
  for (const std::string& name : long_goldens(false)) {
    if (only != nullptr && name.find(only) == std::string::npos) continue;
    ++checked;
    SCOPED_TRACE(name);
    check_long_golden(name);
  }
  EXPECT_GT(checked, 0) << "no long golden matches CADENZA_LONG_GOLDEN";
}

}  // namespace
}  // namespace cadenza::model
