// The Prometheus text pieces (src/wire/exposition.h), histograms (histogram.h) and the registry
// (registry.h) that `cadenza serve` and `cadenza gateway` both render /metrics with.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "wire/exposition.h"
#include "wire/histogram.h"
#include "wire/registry.h"

namespace cadenza::wire {
namespace {

TEST(PrometheusText, Values) {
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(3), "3");
  EXPECT_EQ(format_value(-7), "-7");
  EXPECT_EQ(format_value(123456789012.0), "123456789012");
  EXPECT_EQ(format_value(0.125), "0.125");
  EXPECT_EQ(format_value(0.0025), "0.0025");
  EXPECT_EQ(format_value(2.5), "2.5");
  EXPECT_EQ(format_value(1e300), "1e+300");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
}

TEST(PrometheusText, LabelValuesAreEscaped) {
  EXPECT_EQ(escape_label_value(R"(a"b\c)"), R"(a\"b\\c)");
  EXPECT_EQ(escape_label_value("two\nlines"), "two\\nlines");
  EXPECT_EQ(label_text({}), "");
  EXPECT_EQ(label_text({{"route", "chat"}, {"status", "200"}}), R"({route="chat",status="200"})");
  EXPECT_EQ(label_text({{"k", "q\"\\\n"}}), R"({k="q\"\\\n"})");
}

TEST(PrometheusText, HeaderAndSample) {
  std::string out;
  write_header(out, "x_total", MetricType::counter, "Things \\ counted\nhere.");
  write_sample(out, "x_total", {{"a", "b"}}, 2);
  write_sample(out, "x_total", {}, 0.5);
  EXPECT_EQ(out,
            "# HELP x_total Things \\\\ counted\\nhere.\n# TYPE x_total counter\n"
            "x_total{a=\"b\"} 2\nx_total 0.5\n");
}

TEST(PrometheusHistogram, CumulativeBucketsSumAndCount) {
  Histogram h({0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 1.0, 3.0, 100.0}) h.observe(v);
  EXPECT_EQ(h.count(), 6u);
  EXPECT_DOUBLE_EQ(h.sum(), 104.65);
  EXPECT_EQ(h.cumulative(0), 2u);  // le is inclusive: 0.1 falls in the 0.1 bucket
  EXPECT_EQ(h.cumulative(1), 4u);
  EXPECT_EQ(h.cumulative(2), 5u);
  EXPECT_EQ(h.cumulative(3), 6u);  // +Inf
  std::string out;
  h.render("lat_seconds", {{"upstream", "u:1"}}, out);
  EXPECT_EQ(out,
            "lat_seconds_bucket{upstream=\"u:1\",le=\"0.1\"} 2\n"
            "lat_seconds_bucket{upstream=\"u:1\",le=\"1\"} 4\n"
            "lat_seconds_bucket{upstream=\"u:1\",le=\"10\"} 5\n"
            "lat_seconds_bucket{upstream=\"u:1\",le=\"+Inf\"} 6\n"
            "lat_seconds_sum{upstream=\"u:1\"} 104.65\n"
            "lat_seconds_count{upstream=\"u:1\"} 6\n");
  std::string plain;
  Histogram({0.5}).render("t", {}, plain);
  EXPECT_EQ(plain, "t_bucket{le=\"0.5\"} 0\nt_bucket{le=\"+Inf\"} 0\nt_sum 0\nt_count 0\n");
}

TEST(PrometheusHistogram, NonsenseObservationsCountAsZero) {
  Histogram h({0.1});
  h.observe(std::nan(""));
  h.observe(-1);
  h.observe(std::numeric_limits<double>::infinity());
  EXPECT_EQ(h.count(), 3u);
  EXPECT_EQ(h.sum(), 0);
  EXPECT_EQ(h.cumulative(0), 3u);
}

void declare_example(Registry& r) {
  r.declare("b_requests_total", MetricType::counter, "Requests.");
  r.declare("a_up", MetricType::gauge, "Up.", WhenEmpty::zero);
  r.declare("c_seconds", MetricType::histogram, "Latency.", WhenEmpty::header_only, {0.5, 2});
  r.declare("d_never_total", MetricType::counter, "Omitted while empty.", WhenEmpty::omit);
}

TEST(PrometheusRegistry, FamiliesInDeclarationOrderSeriesByLabelValue) {
  Registry r;
  declare_example(r);
  r.inc("b_requests_total", {{"layer", "10"}, {"code", "x"}});
  r.inc("b_requests_total", {{"layer", "2"}, {"code", "y"}}, 3);
  r.inc("b_requests_total", {{"layer", "2"}, {"code", "b"}});
  r.inc("b_requests_total", {{"layer", "2"}, {"code", "b"}});
  r.inc("b_requests_total", {{"layer", "-"}, {"code", "z"}});
  r.observe("c_seconds", {{"route", "chat"}}, 1);
  EXPECT_EQ(r.value("b_requests_total", {{"layer", "2"}, {"code", "b"}}), 2);
  EXPECT_EQ(r.value("b_requests_total", {{"layer", "3"}, {"code", "b"}}), 0);
  EXPECT_EQ(r.value("c_seconds", {{"route", "chat"}}), 1);  // a histogram's count
  EXPECT_EQ(r.value("unknown", {}), 0);
  EXPECT_EQ(r.render(),
            "# HELP b_requests_total Requests.\n# TYPE b_requests_total counter\n"
            "b_requests_total{layer=\"2\",code=\"b\"} 2\n"
            "b_requests_total{layer=\"2\",code=\"y\"} 3\n"
            "b_requests_total{layer=\"10\",code=\"x\"} 1\n"
            "b_requests_total{layer=\"-\",code=\"z\"} 1\n"
            "# HELP a_up Up.\n# TYPE a_up gauge\n"
            "a_up 0\n"
            "# HELP c_seconds Latency.\n# TYPE c_seconds histogram\n"
            "c_seconds_bucket{route=\"chat\",le=\"0.5\"} 0\n"
            "c_seconds_bucket{route=\"chat\",le=\"2\"} 1\n"
            "c_seconds_bucket{route=\"chat\",le=\"+Inf\"} 1\n"
            "c_seconds_sum{route=\"chat\"} 1\n"
            "c_seconds_count{route=\"chat\"} 1\n");
}

TEST(PrometheusRegistry, EmptyFamilies) {
  Registry r;
  declare_example(r);
  r.declare("e_seconds", MetricType::histogram, "Zero histogram.", WhenEmpty::zero, {1});
  EXPECT_EQ(r.render(),
            "# HELP b_requests_total Requests.\n# TYPE b_requests_total counter\n"
            "# HELP a_up Up.\n# TYPE a_up gauge\na_up 0\n"
            "# HELP c_seconds Latency.\n# TYPE c_seconds histogram\n"
            "# HELP e_seconds Zero histogram.\n# TYPE e_seconds histogram\n"
            "e_seconds_bucket{le=\"1\"} 0\ne_seconds_bucket{le=\"+Inf\"} 0\n"
            "e_seconds_sum 0\ne_seconds_count 0\n");
  r.set("d_never_total", {{"k", "v"}}, 4);
  EXPECT_NE(r.render().find("# TYPE d_never_total counter\nd_never_total{k=\"v\"} 4\n"),
            std::string::npos);
  r.clear("d_never_total");
  EXPECT_EQ(r.render().find("d_never_total"), std::string::npos);
}

TEST(PrometheusRegistry, SetReplacesIncAdds) {
  Registry r;
  declare_example(r);
  r.set("a_up", {{"upstream", "u"}}, 1);
  r.set("a_up", {{"upstream", "u"}}, 0.5);
  r.inc("b_requests_total", {}, 2.5);
  r.inc("b_requests_total", {});
  EXPECT_EQ(r.value("a_up", {{"upstream", "u"}}), 0.5);
  EXPECT_EQ(r.value("b_requests_total", {}), 3.5);
}

TEST(PrometheusRegistry, PromtoolAcceptsTheText) {
  Registry r;
  declare_example(r);
  r.inc("b_requests_total", {{"layer", "1"}, {"code", "quote\" back\\ nl\n"}});
  r.set("a_up", {{"upstream", "127.0.0.1:9"}}, 1);
  for (double v : {0.1, 0.7, 5.0}) r.observe("c_seconds", {{"route", "chat"}}, v);
  r.observe("c_seconds", {{"route", "completions"}}, 0.2);
  if (std::system("command -v promtool > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool is not installed: `promtool check metrics` skipped";
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("wire-metrics-" + std::to_string(::getpid()) + ".txt"))
                               .string();
  std::ofstream(file) << r.render();
  const int rc = std::system(("promtool check metrics < " + file).c_str());
  std::filesystem::remove(file);
  EXPECT_EQ(rc, 0) << r.render();
}

}  // namespace
}  // namespace cadenza::wire
