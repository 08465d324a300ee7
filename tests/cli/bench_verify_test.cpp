// `cadenza bench --verify-curve` (src/cli/bench_verify.h): the list parser on its own, and the
// mode as a user runs it on the shared tiny model (skipped without ../shared): the table and the
// JSON have a row per (c, P) with their fields, P = 1 is always measured, and bad values (P < 1 or
// > 32, c < 1, depth + P over the context, options without --verify-curve) are usage errors with a
// clear message and a non-zero exit. No timing assertions: the numbers are a benchmark's.
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench_test_util.h"
#include "cli/bench_verify.h"
#include "cli_process.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"

namespace cadenza {
namespace {

using json = nlohmann::json;
using test::run_cadenza;
using test::shell_quote;

TEST(ParseIntList, RangesAndListsSortedAndDistinct) {
  auto r = cli::parse_int_list("--x", "1-8", 1, 32);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(*r, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  r = cli::parse_int_list("--x", "8,1", 1, 32);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(*r, (std::vector<int32_t>{1, 8}));
  r = cli::parse_int_list("--x", "4-6,2,5,32", 1, 32);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(*r, (std::vector<int32_t>{2, 4, 5, 6, 32}));
  r = cli::parse_int_list("--x", "3-3", 1, 32);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(*r, (std::vector<int32_t>{3}));
}

TEST(ParseIntList, BadTextIsAnErrorNamingTheOption) {
  for (const char* bad : {"", "0", "33", "1-33", "0-4", "a", "1,", ",1", "1,,2", "4-2", "1-", "-1",
                          "+1", "1.5", "1 2", "99999999999999999999"}) {
    auto r = cli::parse_int_list("--verify-positions", bad, 1, 32);
    ASSERT_FALSE(r.ok()) << "'" << bad << "' parsed";
    EXPECT_NE(r.error().find("--verify-positions"), std::string::npos) << r.error();
  }
  auto r = cli::parse_int_list("--x", "40", 1, 32);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("[1, 32]"), std::string::npos) << r.error();
}

TEST(ParseVerifyOptions, AddsPositionOneAndChecksDepth) {
  cli::VerifyCurveArgs a;
  ASSERT_TRUE(cli::parse_verify_options("2,4", "3", 7, a).ok());
  EXPECT_EQ(a.positions, (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(a.sequences, (std::vector<int32_t>{3}));
  EXPECT_EQ(a.depth, 7);
  const Status bad_c = cli::parse_verify_options("1", "0", 7, a);
  ASSERT_FALSE(bad_c.ok());
  EXPECT_NE(bad_c.error().find("--verify-batch"), std::string::npos) << bad_c.error();
  const Status bad_depth = cli::parse_verify_options("1", "1", -1, a);
  ASSERT_FALSE(bad_depth.ok());
  EXPECT_NE(bad_depth.error().find("--depth"), std::string::npos) << bad_depth.error();
}

class BenchVerifyTest : public test::TinyModelBenchTest {
 protected:
  std::string bench(const std::string& options) const {
    return bench_on_model("--verify-curve " + options);
  }
};

TEST_F(BenchVerifyTest, JsonHasARowPerSequenceCountAndPositionCount) {
  const test::CliRun r =
      run_cadenza(bench("--verify-positions 2-3 --verify-batch 1,2 --depth 20 -r 2 --json"));
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << "stdout is not JSON:\n" << r.out;
  EXPECT_EQ(j.value("model", ""), model_.string());
  EXPECT_EQ(j.value("architecture", ""), "llama");
  EXPECT_EQ(j.value("threads", 0), 2);
  EXPECT_EQ(j.value("kv_cache_type", ""), "f16");
  EXPECT_EQ(j.value("depth", 0), 20);
  EXPECT_EQ(j.value("repetitions", 0), 2);
  EXPECT_EQ(j.value("warmup", -1), 1);
  ASSERT_TRUE(j.contains("verify_curve"));
  const json& rows = j["verify_curve"];
  ASSERT_TRUE(rows.is_array());
  // P = 1 is added: the ratios are to it.
  const std::vector<std::pair<int, int>> expected = {{1, 1}, {1, 2}, {1, 3}, {2, 1}, {2, 2}, {2, 3}};
  ASSERT_EQ(rows.size(), expected.size()) << rows.dump(2);
  for (size_t i = 0; i < expected.size(); ++i) {
    const json& row = rows[i];
    const auto [c, p] = expected[i];
    EXPECT_EQ(row.value("sequences", 0), c) << row.dump();
    EXPECT_EQ(row.value("positions", 0), p) << row.dump();
    const json& ms = row["step_ms"];
    EXPECT_GT(ms.value("min", 0.0), 0.0) << row.dump();
    EXPECT_LE(ms.value("min", 0.0), ms.value("median", 0.0)) << row.dump();
    EXPECT_GE(ms.value("max", 0.0), ms.value("median", 0.0)) << row.dump();
    EXPECT_GE(row["cpu_ms"].value("median", -1.0), 0.0) << row.dump();
    EXPECT_LE(row["cpu_ms"].value("min", -1.0), row["cpu_ms"].value("median", -1.0)) << row.dump();
    for (const char* field : {"ratio_to_p1", "cpu_ratio_to_p1"}) {
      ASSERT_TRUE(row.contains(field)) << field << " " << row.dump();
      if (p == 1 && row[field].get<double>() > 0) {
        EXPECT_DOUBLE_EQ(row[field].get<double>(), 1.0) << field;
      }
    }
    if (p == 1) {
      EXPECT_DOUBLE_EQ(row.value("ratio_to_p1", 0.0), 1.0);
    } else {
      EXPECT_GT(row.value("ratio_to_p1", 0.0), 0.0);
    }
    // tokens/s is c * P over the median step time.
    EXPECT_NEAR(row.value("tokens_per_s", 0.0), 1e3 * c * p / ms.value("median", 1.0),
                1e-6 * row.value("tokens_per_s", 0.0));
  }
}

TEST_F(BenchVerifyTest, TablePrintsARowPerPointOnStdout) {
  const test::CliRun r = run_cadenza(bench("--verify-positions 1,4 --verify-batch 3 --depth 0 -r 1"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("| step ms (median) |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("context depth 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| cpu x P=1 |"), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\|   3 \|  1 \| +[0-9.]+ \| +[0-9.]+ \|  1\.00 \|)")))
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\|   3 \|  4 \| +[0-9.]+ \| +[0-9.]+ \| +[0-9.]+ \|)")))
      << r.out;
  EXPECT_EQ(r.out.find("[info]"), std::string::npos) << "a log line on stdout:\n" << r.out;
}

TEST_F(BenchVerifyTest, BadValuesAreUsageErrors) {
  struct Case {
    std::string options, message;
  };
  const std::vector<Case> cases = {
      {"--verify-positions 0", "--verify-positions '0': 0 is out of range"},
      {"--verify-positions 1-33", "--verify-positions '1-33': 33 is out of range"},
      {"--verify-positions x", "is not a number"},
      {"--verify-batch 0", "--verify-batch '0': 0 is out of range"},
      {"--verify-batch 1,,2", "has an empty item"},
      {"--depth -3", "--depth -3 must be >= 0"},
      // The shared tiny model's context is 2048 tokens.
      {"--depth 2045 --verify-positions 1-4", "--depth 2045 + 4 positions exceeds the model's context"},
      {"--prompt-file " + shell_quote(model_.string()), "not with --prompt-file"},
  };
  for (const Case& c : cases) {
    const test::CliRun r = run_cadenza(bench(c.options + " -r 1"));
    EXPECT_EQ(r.status, 2) << c.options << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.options << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.options;
  }
  // The mode's options without the mode.
  const test::CliRun alone =
      run_cadenza("bench -m " + shell_quote(model_.string()) + " --verify-positions 1-4");
  EXPECT_NE(alone.status, 0);
  EXPECT_NE(alone.err.find("--verify-curve"), std::string::npos) << alone.err;
  // Right at the context: depth + P = 2048 is fine.
  const test::CliRun edge = run_cadenza(bench("--depth 2046 --verify-positions 1-2 --verify-batch 1 -r 1 --json"));
  EXPECT_EQ(edge.status, 0) << edge.err;
}

// In process: a step whose logits would exceed max_logit_bytes is refused before anything runs
// (the limit is 4 GiB by default; here it is lowered to below one step of the tiny model).
TEST_F(BenchVerifyTest, TooManyLogitRowsAreAUsageError) {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 1});
  auto model = model::Model::open(model_.string(), *backend);
  ASSERT_TRUE(model.ok()) << model.error();
  cli::VerifyCurveArgs a;
  ASSERT_TRUE(cli::parse_verify_options("1-4", "2", 4, a).ok());
  a.repetitions = 1;
  const int64_t one_step = 2 * 4 * (*model)->config().n_vocab * static_cast<int64_t>(sizeof(float));
  a.max_logit_bytes = one_step - 1;
  testing::internal::CaptureStderr();
  EXPECT_EQ(cli::run_verify_curve(**model, a), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("--verify-batch 2 x 4 positions"), std::string::npos) << err;
  a.max_logit_bytes = one_step;  // exactly at the limit: runs
  a.json = true;
  testing::internal::CaptureStdout();
  EXPECT_EQ(cli::run_verify_curve(**model, a), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("\"verify_curve\""), std::string::npos) << out;
}

}  // namespace
}  // namespace cadenza
