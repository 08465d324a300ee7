// `cadenza perplexity` as a user runs it. On a synthesized model (no ../shared): the summary on
// stdout only, the batch split does not change the result, a model against its own base gives
// KL 0 and full top-token agreement, another model gives KL > 0, and bad input (missing files,
// a text shorter than one chunk, --ctx above the model's context, a base file from another
// model or text, a damaged one) is a clear error. On ../shared: the trained licenses model's
// perplexity on the held-out text (the reference engine's protocol and value).
#include <cmath>
#include <fstream>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_process.h"
#include "shared_data.h"
#include "synth/synth.h"
#include "test_models.h"

namespace cadenza {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::run_cadenza;
using test::shell_quote;

class PerplexityTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir("cadenza-cli-perplexity");
    for (uint64_t seed : {21u, 22u}) {
      auto written = synth::write_synthetic_model(test::tiny_model_options(seed),
                                                  model(seed).string());
      ASSERT_TRUE(written.ok()) << written.error();
    }
    // About 5000 bytes of text: byte-level tokens, so well over 8 chunks of 64.
    std::ofstream text(dir_->path() / "text.txt");
    for (int i = 0; i < 100; ++i) text << "line " << i << ": the quick brown fox jumps over it.\n";
    std::ofstream(dir_->path() / "other.txt") << std::string(4000, 'x');
    std::ofstream(dir_->path() / "short.txt") << "too short";
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path model(uint64_t seed) { return dir_->path() / ("tiny-" + std::to_string(seed) + ".gguf"); }
  static std::string path(const std::string& name) { return shell_quote((dir_->path() / name).string()); }
  // perplexity on model `seed` over text.txt, 8 chunks of 64 tokens, plus `extra`.
  static test::CliRun ppl(uint64_t seed, const std::string& extra) {
    return run_cadenza("perplexity -m " + shell_quote(model(seed).string()) + " -f " +
                       path("text.txt") + " --ctx 64 --chunks 8 -t 2 " + extra);
  }
  static json parse(const test::CliRun& r) {
    json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }

  static test::TempDir* dir_;
};
test::TempDir* PerplexityTest::dir_ = nullptr;

TEST_F(PerplexityTest, PrintsThePerplexityOnStdoutAndProgressOnStderr) {
  const test::CliRun r = ppl(21, "");
  ASSERT_EQ(r.status, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(PPL = ([0-9.]+) \+/- ([0-9.]+)\n)"))) << r.out;
  const double value = std::stod(m[1]), error = std::stod(m[2]);
  // Random weights over a 300-token vocabulary: roughly uniform, far from a trained model.
  EXPECT_GT(value, 30.0);
  EXPECT_LT(value, 3000.0);
  EXPECT_GT(error, 0.0);
  EXPECT_NE(r.out.find("chunks: 8 of 64 tokens, 248 scored tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("[8/8] ppl"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("[8/8]"), std::string::npos) << r.out;
  // --json carries the same numbers.
  const test::CliRun js = ppl(21, "--json");
  ASSERT_EQ(js.status, 0) << js.err;
  const json j = parse(js);
  EXPECT_NEAR(j.value("ppl", 0.0), value, 1e-4 * value);
  EXPECT_EQ(j.value("chunks", 0), 8);
  EXPECT_EQ(j.value("scored_tokens", 0), 248);
}

TEST_F(PerplexityTest, TheBatchSplitDoesNotChangeTheResult) {
  // One chunk per step in pieces of 16 tokens, one chunk per step, all 8 chunks in one step.
  const json a = parse(ppl(21, "--json -b 16"));
  const json b = parse(ppl(21, "--json -b 64"));
  const json c = parse(ppl(21, "--json -b 4096"));
  ASSERT_TRUE(a.contains("ppl") && b.contains("ppl") && c.contains("ppl"));
  const double ref = b["ppl"].get<double>();
  EXPECT_NEAR(a["ppl"].get<double>(), ref, 1e-5 * ref);
  EXPECT_NEAR(c["ppl"].get<double>(), ref, 1e-5 * ref);
}

TEST_F(PerplexityTest, KlDivergenceAgainstItselfIsZeroAndAgainstAnotherModelPositive) {
  const std::string base = path("base-21.kld");
  const test::CliRun saved = ppl(21, "--json -b 128 --kl-divergence-base " + base);
  ASSERT_EQ(saved.status, 0) << saved.err;
  const double base_ppl = parse(saved).value("ppl", 0.0);
  // 8 chunks x 31 positions x (8 + 8 x (128 + 64)) bytes + the header and 512 tokens.
  EXPECT_EQ(fs::file_size(dir_->path() / "base-21.kld"), 40u + 512 * 4 + 248 * (8 + 192 * 8));

  const test::CliRun self = run_cadenza("perplexity -m " + shell_quote(model(21).string()) +
                                        " --kl-divergence --kl-divergence-base " + base +
                                        " -t 2 --json");
  ASSERT_EQ(self.status, 0) << self.err;
  const json s = parse(self);
  ASSERT_TRUE(s.contains("kl_divergence")) << self.out;
  EXPECT_NEAR(s["kl_divergence"]["mean"].get<double>(), 0.0, 1e-6);
  EXPECT_NEAR(s["kl_divergence"]["max"].get<double>(), 0.0, 1e-5);
  EXPECT_EQ(s["kl_divergence"]["same_top"].get<double>(), 1.0);
  EXPECT_NEAR(s["kl_divergence"]["base_ppl"].get<double>(), base_ppl, 1e-5 * base_ppl);
  EXPECT_NEAR(s.value("ppl", 0.0), base_ppl, 1e-5 * base_ppl);

  // Another model (other random weights, same vocabulary), with the text given: it must match.
  const test::CliRun other = run_cadenza("perplexity -m " + shell_quote(model(22).string()) +
                                         " -f " + path("text.txt") +
                                         " --kl-divergence --kl-divergence-base " + base + " -t 2");
  ASSERT_EQ(other.status, 0) << other.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(other.out, m, std::regex(R"(  mean   ([0-9.]+) \+/- ([0-9.]+)\n)")))
      << other.out;
  EXPECT_GT(std::stod(m[1]), 0.05) << other.out;
  EXPECT_GT(std::stod(m[2]), 0.0) << other.out;
  ASSERT_TRUE(std::regex_search(other.out, m, std::regex(R"(same top token: ([0-9.]+) )"))) << other.out;
  EXPECT_LT(std::stod(m[1]), 100.0) << other.out;
  for (const char* line : {"PPL(model) = ", "PPL(base)  = ", "  median ", "  p99    ", "  max    "})
    EXPECT_NE(other.out.find(line), std::string::npos) << line << "\n" << other.out;
}

TEST_F(PerplexityTest, BadInputIsAClearError) {
  const std::string m21 = shell_quote(model(21).string());
  const auto expect_error = [](const test::CliRun& r, const std::string& what) {
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << "want: " << what << "\ngot: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  };
  expect_error(run_cadenza("perplexity -m " + path("nope.gguf") + " -f " + path("text.txt")),
               "nope.gguf");
  expect_error(run_cadenza("perplexity -m " + m21 + " -f " + path("nope.txt")),
               "nope.txt: no such text file");
  expect_error(run_cadenza("perplexity -m " + m21 + " -f " + path("short.txt") + " --ctx 64"),
               "fewer than one chunk of 64");
  expect_error(run_cadenza("perplexity -m " + m21 + " -f " + path("text.txt") + " --ctx 1000000"),
               "is larger than the context length");
  expect_error(run_cadenza("perplexity -m " + m21 + " --kl-divergence"),
               "--kl-divergence needs --kl-divergence-base");
  expect_error(run_cadenza("perplexity -m " + m21 + " --kl-divergence --kl-divergence-base " +
                           path("nope.kld")),
               "nope.kld: cannot open");
  expect_error(run_cadenza("perplexity -m " + m21 + " --kl-divergence --kl-divergence-base " +
                           path("text.txt")),
               "not a KL-divergence base file");

  // A base from this model and text.txt, used with another text, other chunking, a damaged copy.
  const std::string base = path("base-bad.kld");
  ASSERT_EQ(ppl(21, "--kl-divergence-base " + base).status, 0);
  expect_error(run_cadenza("perplexity -m " + m21 + " -f " + path("other.txt") +
                           " --kl-divergence --kl-divergence-base " + base),
               "made from another text");
  expect_error(run_cadenza("perplexity -m " + m21 + " --ctx 32 --kl-divergence --kl-divergence-base " + base),
               "--ctx 32 differs from the base file's 64");
  fs::resize_file(dir_->path() / "base-bad.kld", fs::file_size(dir_->path() / "base-bad.kld") - 4);
  expect_error(run_cadenza("perplexity -m " + m21 + " --kl-divergence --kl-divergence-base " + base),
               "truncated or damaged");
}

// The shared models: the trained licenses model on the held-out text, and a base file from it
// against a model of another vocabulary.
class SharedPerplexityTest : public testing::Test {
 protected:
  void SetUp() override {
    CADENZA_REQUIRE_SHARED();
    models_ = test::shared_dir() / "models";
    text_ = test::shared_dir() / "text" / "heldout-licenses.txt";
    if (!fs::exists(models_ / "licenses-tiny-f16.gguf") || !fs::exists(text_))
      GTEST_SKIP() << "SKIPPED: ../shared lacks licenses-tiny-f16.gguf or heldout-licenses.txt";
  }
  fs::path models_, text_;
};

TEST_F(SharedPerplexityTest, LicensesModelOnTheHeldOutText) {
  // The first 20 chunks of the reference protocol (ctx 128); the full 200 chunks (about 7 s in a
  // release build, too long for debug and ASan builds) give 33.6213 +/- 0.963 against the
  // reference engine's 33.6215 +/- 0.963 (docs/perplexity.md). After 1 and 20 chunks the
  // reference prints 15.6745 and 30.8135, this tool 15.6741 and 30.8132. The bounds fail for a
  // chunking off by one token (no BOS before the text: 14.61 and 30.8089) or 64 scored rows
  // instead of 63 (15.02 / 30.87).
  const test::CliRun r = run_cadenza("perplexity -m " +
                                     shell_quote((models_ / "licenses-tiny-f16.gguf").string()) +
                                     " -f " + shell_quote(text_.string()) +
                                     " --ctx 128 --chunks 20 -t 2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j.value("scored_tokens", 0), 20 * 63);
  EXPECT_NEAR(j.value("ppl", 0.0), 30.8135, 0.002);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex(R"(\[1/20\] ppl ([0-9.]+))"))) << r.err;
  EXPECT_NEAR(std::stod(m[1]), 15.6745, 0.002);
}

TEST_F(SharedPerplexityTest, AQ8KvCacheIsASmallButNonZeroDivergence) {
  // The licenses model against its own base with its K/V rounded to Q8_0 instead of F16: a
  // perturbation without a second file. Measured (5 chunks): lower bound 2.1e-5, estimate 2.6e-5,
  // same top token 100%.
  test::TempDir dir("cadenza-cli-perplexity-shared");
  const std::string base = shell_quote((dir.path() / "licenses.kld").string());
  const std::string m = shell_quote((models_ / "licenses-tiny-f16.gguf").string());
  const test::CliRun saved = run_cadenza("perplexity -m " + m + " -f " + shell_quote(text_.string()) +
                                         " --chunks 5 -t 2 --kl-divergence-base " + base);
  ASSERT_EQ(saved.status, 0) << saved.err;
  const test::CliRun r = run_cadenza("perplexity -m " + m + " --kv-cache-type q8 --kl-divergence "
                                     "--kl-divergence-base " + base + " -t 2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.contains("kl_divergence")) << r.out;
  const json& k = j["kl_divergence"];
  EXPECT_GT(k["lower_bound_mean"].get<double>(), 1e-7);
  EXPECT_LT(k["lower_bound_mean"].get<double>(), 1e-3);
  EXPECT_GE(k["mean"].get<double>(), 0.0);
  EXPECT_LT(k["mean"].get<double>(), 1e-3);
  EXPECT_EQ(k["quantiles_of"], "lower_bound");
  EXPECT_GT(k["max"].get<double>(), 0.0);
  EXPECT_GE(k["same_top"].get<double>(), 0.95);
  EXPECT_NEAR(j.value("ppl", 0.0), k["base_ppl"].get<double>(), 0.01 * j.value("ppl", 0.0));
}

TEST_F(SharedPerplexityTest, BaseFromAnotherVocabularyIsAnError) {
  if (!fs::exists(models_ / "tiny-llama3-f16.gguf")) GTEST_SKIP() << "SKIPPED: no tiny-llama3-f16.gguf";
  test::TempDir dir("cadenza-cli-perplexity-shared");
  const std::string base = shell_quote((dir.path() / "licenses.kld").string());
  const test::CliRun saved = run_cadenza(
      "perplexity -m " + shell_quote((models_ / "licenses-tiny-f16.gguf").string()) + " -f " +
      shell_quote(text_.string()) + " --ctx 128 --chunks 2 -t 2 --kl-divergence-base " + base);
  ASSERT_EQ(saved.status, 0) << saved.err;
  const test::CliRun r = run_cadenza(
      "perplexity -m " + shell_quote((models_ / "tiny-llama3-f16.gguf").string()) +
      " --kl-divergence --kl-divergence-base " + base + " -t 2");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("made with a vocabulary of 32000 tokens"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace cadenza
