// `cadenza bench -d N` (src/cli/bench.cpp): the pp and tg tests start with N tokens already in the
// context, as llama-bench's -d. On ../shared's tiny model (skipped without it): the table labels
// the tests "ppP @ dN" / "tgT @ dN", the JSON carries the depth, depth + tokens exactly at the
// context runs, one past it is a usage error naming the context. No timing assertions.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench_test_util.h"
#include "cli_process.h"

namespace cadenza {
namespace {

using test::run_cadenza;

class BenchDepthTest : public test::TinyModelBenchTest {
 protected:
  std::string bench(const std::string& options) const {
    return bench_on_model("-r 1 --no-probe --no-peak " + options);
  }
};

TEST_F(BenchDepthTest, TableAndJsonCarryTheDepth) {
  const test::CliRun table = run_cadenza(bench("-p 8 -n 4 -d 300"));
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("pp8 @ d300"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("tg4 @ d300"), std::string::npos) << table.out;
  EXPECT_NE(table.err.find("filling a context of 300 tokens"), std::string::npos) << table.err;

  const test::CliRun js = run_cadenza(bench("-p 8 -n 4 -d 300 --json"));
  ASSERT_EQ(js.status, 0) << js.err;
  const nlohmann::json j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["pp"]["depth"], 300);
  EXPECT_EQ(j["tg"]["depth"], 300);
  EXPECT_GT(j["pp"]["tokens_per_s"]["median"].get<double>(), 0);
  EXPECT_GT(j["tg"]["tokens_per_s"]["median"].get<double>(), 0);
  // Without -d: the labels of before, depth 0.
  const test::CliRun plain = run_cadenza(bench("-p 8 -n 4"));
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.out.find(" @ d"), std::string::npos) << plain.out;
}

TEST_F(BenchDepthTest, DepthPastTheContextIsAUsageError) {
  // The shared tiny model's context is 2048 tokens: 2040 + 8 fits, 2041 + 8 does not.
  const test::CliRun edge = run_cadenza(bench("-p 8 -n 2 -d 2040"));
  EXPECT_EQ(edge.status, 0) << edge.err;
  const test::CliRun over = run_cadenza(bench("-p 8 -n 2 -d 2041"));
  EXPECT_EQ(over.status, 2);
  EXPECT_NE(over.err.find("-d 2041 + max(-p, -n) = 2049 tokens exceeds the model's context of 2048"),
            std::string::npos) << over.err;
  EXPECT_EQ(over.out, "");
  const test::CliRun negative = run_cadenza(bench("-d -1"));
  EXPECT_NE(negative.status, 0);
}

}  // namespace
}  // namespace cadenza
