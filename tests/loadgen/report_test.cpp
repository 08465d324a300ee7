// `bench serve` end to end (JSON, report, compare) and the HTML report in headless Chromium.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "fake_server.h"
#include "loadgen/report.h"
#include "loadgen/results.h"
#include "loadgen/serve_command.h"

namespace cadenza::loadgen {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path out_dir() {
  fs::path d = fs::path(CADENZA_BINARY_DIR) / "loadgen-artifacts";
  fs::create_directories(d);
  return d;
}

// A sweep against the fake server, saved as JSON with a report; returns the JSON path.
std::string sweep_result(const std::string& name, int ttft_ms) {
  testing::FakeServer server({.ttft_ms = ttft_ms, .itl_ms = 10, .chunks = 5});
  ServeOptions o;
  o.url = server.url();
  o.model = "fake";
  o.name = name;
  o.num_requests = 8;
  o.workload.input.mean = 16;
  o.workload.output.mean = 5;
  o.sweep_concurrency = "1,2,4";
  o.slo.ttft_ms = 1000;
  o.quiet = true;
  o.json_path = (out_dir() / (name + ".json")).string();
  o.report_path = (out_dir() / (name + ".html")).string();
  std::FILE* sink = std::tmpfile();
  EXPECT_EQ(run_bench_serve(o, sink), 0);
  std::fclose(sink);
  return o.json_path;
}

TEST(BenchServe, SweepWritesJsonAndReportAndCompares) {
  const std::string a = sweep_result("fast", 20);
  const std::string b = sweep_result("slow", 60);
  auto fa = load_result_file(a);
  ASSERT_TRUE(fa) << fa.error();
  ASSERT_EQ(fa->points.size(), 3u);
  EXPECT_EQ(fa->name, "fast");
  EXPECT_EQ(fa->points[1].label, "c=2");
  EXPECT_EQ(fa->points[2].summary.completed, 8u);
  EXPECT_TRUE(fa->points[2].summary.has_slo);
  EXPECT_EQ(fa->points[0].requests.size(), 8u);
  EXPECT_EQ(fa->points[0].ttft_ms.size(), 8u);
  EXPECT_EQ(fa->points[0].itl_ms.size(), 8u * 4u);
  EXPECT_EQ(fa->config["sweep_concurrency"], "1,2,4");
  const std::string html = slurp(out_dir() / "fast.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Throughput vs TTFT"), std::string::npos);

  const std::string cmp = (out_dir() / "compare.html").string();
  std::FILE* sink = std::tmpfile();
  EXPECT_EQ(run_bench_compare({a, b}, cmp, sink), 0);
  std::rewind(sink);
  char buf[4096] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, sink);
  std::fclose(sink);
  const std::string table(buf, n);
  EXPECT_NE(table.find("fast"), std::string::npos);
  EXPECT_NE(table.find("slow"), std::string::npos);
  EXPECT_NE(slurp(cmp).find("slow c=4"), std::string::npos);
  EXPECT_EQ(run_bench_compare({"/nonexistent.json"}, "", sink = std::tmpfile()), 1);
  std::fclose(sink);
}

TEST(BenchServe, ConfigurationErrorsExitWithOne) {
  ServeOptions o;
  o.model = "";
  std::FILE* sink = std::tmpfile();
  EXPECT_EQ(run_bench_serve(o, sink), 1);
  o.model = "m";
  o.url = "https://x";
  EXPECT_EQ(run_bench_serve(o, sink), 1);
  o.url = "http://127.0.0.1:1";
  o.sweep_concurrency = "1,0";
  EXPECT_EQ(run_bench_serve(o, sink), 1);
  std::fclose(sink);
}

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string cmd = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) return name;
  }
  return "";
}

// The report renders in headless Chromium with no console messages (no script errors), and the
// screenshot lands in the build folder for CI to keep.
TEST(Report, RendersInHeadlessChromium) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium not installed: report rendering NOT checked";
  const std::string json = sweep_result("render", 20);
  auto f = load_result_file(json);
  ASSERT_TRUE(f);
  const fs::path html = out_dir() / "report.html";
  const fs::path png = out_dir() / "report.png";
  const fs::path log = out_dir() / "chromium.log";
  const fs::path dom = out_dir() / "report.dom.html";
  ASSERT_TRUE(write_report({*f}, "render test", html.string()));
  fs::remove(png);
  const std::string flags =
      " --headless --disable-gpu --no-sandbox --no-first-run --disable-extensions"
      " --user-data-dir=" +
      (out_dir() / "chromium-profile").string() +
      " --enable-logging=stderr --v=0 --window-size=1280,1800";
  const std::string shot = "timeout 90 " + chromium + flags + " --screenshot=" + png.string() +
                           " file://" + html.string() + " >" + log.string() + " 2>&1";
  ASSERT_EQ(std::system(shot.c_str()), 0) << slurp(log);
  ASSERT_TRUE(fs::exists(png)) << slurp(log);
  EXPECT_GT(fs::file_size(png), 10000u);
  const std::string dump = "timeout 90 " + chromium + flags + " --dump-dom file://" +
                           html.string() + " >" + dom.string() + " 2>>" + log.string();
  ASSERT_EQ(std::system(dump.c_str()), 0) << slurp(log);
  const std::string dom_text = slurp(dom);
  EXPECT_NE(dom_text.find("<svg"), std::string::npos);
  EXPECT_NE(dom_text.find("TTFT CDF"), std::string::npos);
  const std::string messages = slurp(log);
  EXPECT_EQ(messages.find("CONSOLE("), std::string::npos) << messages;
  EXPECT_EQ(messages.find("Uncaught"), std::string::npos) << messages;
  std::error_code ec;
  fs::remove_all(out_dir() / "chromium-profile", ec);  // keep the artifact folder small
  std::printf("report screenshot: %s\n", png.c_str());
}

}  // namespace
}  // namespace cadenza::loadgen
