// Speculative-decoding counters from /metrics: the Prometheus text parser, the per-point delta,
// the JSON round trip, and `bench serve` against a fake server whose /metrics page changes.
#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fake_server.h"
#include "loadgen/results.h"
#include "loadgen/serve_command.h"
#include "loadgen/spec_metrics.h"

namespace cadenza::loadgen {
namespace {

// What `cadenza serve` renders (src/server/metrics.cpp), with the given counter values.
std::string page(int drafts, int draft_tokens, int accepted, std::vector<int> per_pos) {
  std::string s =
      "# HELP cadenza_num_requests_running Requests in the running batch.\n"
      "# TYPE cadenza_num_requests_running gauge\n"
      "cadenza_num_requests_running 0\n"
      "# TYPE cadenza_spec_decode_num_drafts_total counter\n"
      "cadenza_spec_decode_num_drafts_total " + std::to_string(drafts) + "\n"
      "cadenza_spec_decode_num_draft_tokens_total " + std::to_string(draft_tokens) + "\n"
      "# TYPE cadenza_spec_decode_num_accepted_tokens_per_pos_total counter\n";
  for (size_t i = 0; i < per_pos.size(); ++i)
    s += "cadenza_spec_decode_num_accepted_tokens_per_pos_total{position=\"" + std::to_string(i) +
         "\"} " + std::to_string(per_pos[i]) + "\n";
  s += "cadenza_spec_decode_num_accepted_tokens_total " + std::to_string(accepted) + "\n";
  s += "cadenza_http_requests_total{route=\"/metrics\",status=\"200\"} 3\n";
  return s;
}

TEST(SpecMetrics, ParsesTheServersPage) {
  const SpecCounters c = parse_spec_counters(page(10, 40, 13, {8, 4, 1}));
  EXPECT_TRUE(c.present);
  EXPECT_EQ(c.drafts, 10);
  EXPECT_EQ(c.draft_tokens, 40);
  EXPECT_EQ(c.accepted, 13);
  EXPECT_EQ(c.accepted_per_pos, (std::vector<double>{8, 4, 1}));
}

TEST(SpecMetrics, LabelsTimestampsSumsAndGarbage) {
  const std::string text =
      "cadenza_spec_decode_num_drafts_total{engine=\"0\"} 3 1700000000000\r\n"
      "cadenza_spec_decode_num_drafts_total{engine=\"1\"} 4.0\n"
      "  cadenza_spec_decode_num_draft_tokens_total 1.2e1\n"
      "cadenza_spec_decode_num_accepted_tokens_per_pos_total{model=\"a,b=\\\"c\\\"\","
      "position=\"1\"} 5\n"
      "cadenza_spec_decode_num_accepted_tokens_per_pos_total{position=\"3\", engine=\"1\"} 2\n"
      "cadenza_spec_decode_num_accepted_tokens_per_pos_total{position=\"3\", engine=\"2\"} 1\n"
      // Skipped: no position, a bad position, a huge one, no value, not a number, negative,
      // NaN, a name that only starts like ours, an unterminated label set, a bare name.
      "cadenza_spec_decode_num_accepted_tokens_per_pos_total 9\n"
      "cadenza_spec_decode_num_accepted_tokens_per_pos_total{position=\"x\"} 9\n"
      "cadenza_spec_decode_num_accepted_tokens_per_pos_total{position=\"99999999\"} 9\n"
      "cadenza_spec_decode_num_accepted_tokens_total\n"
      "cadenza_spec_decode_num_accepted_tokens_total abc\n"
      "cadenza_spec_decode_num_accepted_tokens_total -4\n"
      "cadenza_spec_decode_num_accepted_tokens_total NaN\n"
      "cadenza_spec_decode_num_drafts_total_extra 100\n"
      "cadenza_spec_decode_num_drafts_total{engine=\"0\" 100\n"
      "cadenza_spec_decode_num_drafts_total\n"
      "\x01\xff garbage {{{ }\n"
      "\n"
      "cadenza_spec_decode_num_accepted_tokens_total 6";  // no final newline
  const SpecCounters c = parse_spec_counters(text);
  EXPECT_TRUE(c.present);
  EXPECT_EQ(c.drafts, 7);
  EXPECT_EQ(c.draft_tokens, 12);
  EXPECT_EQ(c.accepted, 6);
  EXPECT_EQ(c.accepted_per_pos, (std::vector<double>{0, 5, 0, 3}));
}

TEST(SpecMetrics, AbsentSeries) {
  for (const char* text :
       {"", "\n\n# only comments\n", "vllm:num_requests_running{model_name=\"m\"} 0\n",
        "<html>not found</html>", "data: {\"choices\":[]}\n\n"}) {
    const SpecCounters c = parse_spec_counters(text);
    EXPECT_FALSE(c.present) << text;
    EXPECT_FALSE(spec_delta(c, c).has_value()) << text;
  }
}

TEST(SpecMetrics, DeltaAndRates) {
  const auto before = parse_spec_counters(page(10, 40, 13, {8, 4, 1}));
  const auto after = parse_spec_counters(page(30, 120, 43, {23, 14, 5, 1}));
  const auto d = spec_delta(before, after);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->drafts, 20);
  EXPECT_EQ(d->draft_tokens, 80);
  EXPECT_EQ(d->accepted, 30);
  EXPECT_EQ(d->accepted_per_pos, (std::vector<int64_t>{15, 10, 4, 1}));
  EXPECT_DOUBLE_EQ(d->acceptance_rate, 30.0 / 80.0);
  EXPECT_DOUBLE_EQ(d->mean_tokens_per_verification, 1.0 + 30.0 / 20.0);
  EXPECT_EQ(d->acceptance_by_position, (std::vector<double>{0.75, 0.5, 0.2, 0.05}));
}

TEST(SpecMetrics, NoDraftsOrAResetGiveNothing) {
  const auto zero = parse_spec_counters(page(0, 0, 0, {}));
  EXPECT_TRUE(zero.present);  // a server without speculation exports zeros
  EXPECT_FALSE(spec_delta(zero, zero).has_value());
  const auto some = parse_spec_counters(page(5, 20, 3, {3}));
  EXPECT_FALSE(spec_delta(some, some).has_value());  // nothing drafted during the point
  EXPECT_FALSE(spec_delta(some, zero).has_value());  // restarted server: counters went down
  EXPECT_FALSE(spec_delta(SpecCounters{}, some).has_value());  // the first page had none
  // Accepted but not drafted cannot be; per-position counters that fall are a reset too.
  EXPECT_FALSE(
      spec_delta(parse_spec_counters(page(5, 20, 3, {3})), parse_spec_counters(page(6, 24, 2, {3})))
          .has_value());
  EXPECT_FALSE(
      spec_delta(parse_spec_counters(page(5, 20, 3, {3})), parse_spec_counters(page(6, 24, 4, {2})))
          .has_value());
}

TEST(SpecMetrics, ResultFileRoundTripAndSummary) {
  ResultFile f;
  f.name = "spec";
  PointResult with, without;
  with.label = "c=1";
  with.spec_decode = spec_delta(parse_spec_counters(page(0, 0, 0, {})),
                                parse_spec_counters(page(4, 16, 6, {3, 2, 1})));
  ASSERT_TRUE(with.spec_decode);
  without.label = "c=2";
  f.points = {with, without};
  const nlohmann::json j = to_json(f);
  EXPECT_TRUE(j["points"][1]["spec_decode"].is_null());
  EXPECT_EQ(j["points"][0]["spec_decode"]["drafts"], 4);
  EXPECT_EQ(j["points"][0]["spec_decode"]["accepted_per_position"], nlohmann::json({3, 2, 1}));
  const auto dir = std::filesystem::path(CADENZA_BINARY_DIR) / "loadgen-artifacts";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "spec-roundtrip.json").string();
  ASSERT_TRUE(save_result_file(f, path));
  auto back = load_result_file(path);
  ASSERT_TRUE(back) << back.error();
  ASSERT_TRUE(back->points.at(0).spec_decode);
  EXPECT_FALSE(back->points.at(1).spec_decode);
  EXPECT_EQ(back->points[0].spec_decode->accepted, 6);
  EXPECT_DOUBLE_EQ(back->points[0].spec_decode->acceptance_rate, 6.0 / 16.0);
  EXPECT_EQ(back->points[0].spec_decode->acceptance_by_position,
            (std::vector<double>{0.75, 0.5, 0.25}));

  char* buf = nullptr;
  size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  print_summary(out, back->points[0]);
  print_summary(out, back->points[1]);
  print_table(out, {&back->points[0], &back->points[1]});
  std::fclose(out);
  const std::string text(buf, len);
  std::free(buf);
  EXPECT_EQ(text.find("speculative decoding"), text.rfind("speculative decoding")) << text;
  EXPECT_NE(text.find("37.50% (accepted / draft tokens)"), std::string::npos) << text;
  EXPECT_NE(text.find("2.500 (1 + accepted / verifications)"), std::string::npos) << text;
  EXPECT_NE(text.find("[2] 0.250"), std::string::npos) << text;
  // The table: speculation columns, "-" for the point without counters.
  EXPECT_NE(text.find("  accept  tok/vf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("   37.5%    2.50\n"), std::string::npos) << text;
  EXPECT_NE(text.find("       -       -\n"), std::string::npos) << text;

  // Without any counters the table keeps its usual columns.
  out = open_memstream(&buf, &len);
  print_table(out, {&back->points[1]});
  std::fclose(out);
  const std::string plain(buf, len);
  std::free(buf);
  EXPECT_EQ(plain.find("accept"), std::string::npos) << plain;
}

std::string run_to_json(const std::string& url, const std::string& api_key, int& rc) {
  const auto dir = std::filesystem::path(CADENZA_BINARY_DIR) / "loadgen-artifacts";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "spec-run.json").string();
  std::filesystem::remove(path);
  ServeOptions o;
  o.url = url;
  o.model = "fake";
  o.api_key = api_key;
  o.num_requests = 2;
  o.warmup = 1;
  o.workload.input.mean = 8;
  o.workload.output.mean = 3;
  o.sweep_concurrency = "1,2";
  o.quiet = true;
  o.json_path = path;
  std::FILE* out = std::fopen("/dev/null", "w");
  rc = run_bench_serve(o, out);
  std::fclose(out);
  return path;
}

// Scrapes come after the warm-up and after the measured requests, carry the API key, and each
// point gets the delta of its own two pages.
TEST(SpecMetrics, BenchServeReportsEachPointsDelta) {
  testing::FakeScript script{.ttft_ms = 2, .itl_ms = 1, .chunks = 3};
  script.metrics_pages = {page(2, 8, 3, {2, 1}), page(12, 48, 23, {10, 8, 5}),
                          page(12, 48, 23, {10, 8, 5}), page(12, 48, 23, {10, 8, 5})};
  testing::FakeServer server(script);
  int rc = -1;
  auto f = load_result_file(run_to_json(server.url(), "sekrit", rc));
  EXPECT_EQ(rc, 0);
  ASSERT_TRUE(f) << f.error();
  EXPECT_EQ(server.scrapes(), 4);
  for (const auto& a : server.scrape_auth()) EXPECT_EQ(a, "Bearer sekrit");
  EXPECT_EQ(server.requests(), 6);  // 2 points x (1 warm-up + 2): scrapes are not requests
  ASSERT_EQ(f->points.size(), 2u);
  ASSERT_TRUE(f->points[0].spec_decode);
  EXPECT_EQ(f->points[0].spec_decode->drafts, 10);
  EXPECT_EQ(f->points[0].spec_decode->draft_tokens, 40);
  EXPECT_EQ(f->points[0].spec_decode->accepted, 20);
  EXPECT_EQ(f->points[0].spec_decode->accepted_per_pos, (std::vector<int64_t>{8, 7, 5}));
  EXPECT_FALSE(f->points[1].spec_decode);  // no drafts during the second point
}

// A server without /metrics (404) or without speculation series: the benchmark still succeeds,
// with no speculation section.
TEST(SpecMetrics, NoMetricsIsNotAFailure) {
  for (bool has_page : {false, true}) {
    testing::FakeScript script{.ttft_ms = 2, .itl_ms = 1, .chunks = 3};
    if (has_page) script.metrics_pages = {"# nothing of ours\nother_metric 1\n"};
    testing::FakeServer server(script);
    int rc = -1;
    auto f = load_result_file(run_to_json(server.url(), "", rc));
    EXPECT_EQ(rc, 0);
    ASSERT_TRUE(f) << f.error();
    EXPECT_EQ(server.scrapes(), 4);
    for (const auto& p : f->points) {
      EXPECT_EQ(p.summary.completed, 2u);
      EXPECT_FALSE(p.spec_decode);
    }
  }
}

}  // namespace
}  // namespace cadenza::loadgen
