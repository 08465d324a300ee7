// The CLI11 binding: `bench serve` / `bench compare` parse into runs, and plain `bench` is left
// alone (the returned function answers nullopt).
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include "fake_server.h"
#include "loadgen/bench_serve_cli.h"
#include "loadgen/results.h"

namespace cadenza::loadgen {
namespace {

std::optional<int> parse_and_run(std::vector<std::string> args) {
  CLI::App app;
  auto* bench = app.add_subcommand("bench");
  std::string model;
  bench->add_option("-m,--model", model);
  auto run = add_bench_serve(*bench);
  std::vector<const char*> argv{"cadenza"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return run();
}

TEST(Cli, BenchServeAndCompareParseAndRun) {
  testing::FakeServer server({.ttft_ms = 5, .itl_ms = 2, .chunks = 3});
  const auto dir = std::filesystem::path(CADENZA_BINARY_DIR) / "loadgen-artifacts";
  std::filesystem::create_directories(dir);
  const std::string json = (dir / "cli.json").string();
  auto rc = parse_and_run({"bench", "serve", "--url", server.url(), "--model", "fake",
                           "--endpoint", "completions", "--num-requests", "3", "--input-len",
                           "8", "--output-len", "3", "--len-dist", "uniform", "--quiet",
                           "--json", json});
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 0);
  auto f = load_result_file(json);
  ASSERT_TRUE(f) << f.error();
  EXPECT_EQ(f->config["endpoint"], "completions");
  EXPECT_EQ(f->config["len_dist"], "uniform");
  EXPECT_EQ(f->points.at(0).summary.completed, 3u);
  EXPECT_EQ(server.targets().at(0), "/v1/completions");

  auto cmp = parse_and_run({"bench", "compare", json, json});
  ASSERT_TRUE(cmp.has_value());
  EXPECT_EQ(*cmp, 0);
  EXPECT_FALSE(parse_and_run({"bench", "-m", "x.gguf"}).has_value());
  EXPECT_THROW(parse_and_run({"bench", "serve", "--url", server.url()}), CLI::ParseError);
  EXPECT_THROW(parse_and_run({"bench", "serve", "--model", "m", "--endpoint", "x"}),
               CLI::ParseError);
}

}  // namespace
}  // namespace cadenza::loadgen
