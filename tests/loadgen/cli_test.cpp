// The CLI11 binding: `bench serve` / `bench compare` parse into runs, and plain `bench` is left
// alone (the returned function answers nullopt).
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// Sampling options reach the request body, and every sweep point sends prompts of its own (a
// server's prefix cache must not serve a later point from an earlier one's prompts).
TEST(Cli, SweepPointsDrawTheirOwnPromptsAndSendSampling) {
  testing::FakeServer server({.ttft_ms = 2, .itl_ms = 1, .chunks = 2});
  auto rc = parse_and_run({"bench", "serve", "--url", server.url(), "--model", "fake",
                           "--endpoint", "completions", "--num-requests", "3", "--input-len",
                           "8", "--output-len", "2", "--sweep-concurrency", "1,2", "--quiet",
                           "--temperature", "0.5", "--top-k", "7"});
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 0);
  const auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 6u);
  std::set<std::string> first, second;
  for (size_t i = 0; i < bodies.size(); ++i) {
    auto j = nlohmann::json::parse(bodies[i]);
    EXPECT_EQ(j["temperature"], 0.5);
    EXPECT_EQ(j["top_k"], 7);
    EXPECT_FALSE(j.contains("top_p"));
    (i < 3 ? first : second).insert(j["prompt"].get<std::string>());
  }
  EXPECT_EQ(first.size(), 3u);
  EXPECT_EQ(second.size(), 3u);
  for (const auto& prompt : second) EXPECT_EQ(first.count(prompt), 0u) << prompt;
}

}  // namespace
}  // namespace cadenza::loadgen
