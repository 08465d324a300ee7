// wire::parse_proc_stat on fixed /proc/PID/stat lines (a command name with spaces and
// parentheses, truncated and garbled lines), and the live process's figures.
#include "wire/process_metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cadenza::wire {
namespace {

// A stat line in proc(5)'s layout: utime 250, stime 50 ticks; starttime 1000 ticks; vsize
// 123456789 bytes; rss 2000 pages. The command name holds ") (" to catch a first-')' parser.
const char* kStat =
    "4242 (cadenza serve) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 1000 "
    "123456789 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";

TEST(ProcessMetrics, ParsesTheFieldsAfterTheLastParenthesis) {
  auto s = parse_proc_stat(kStat, 100, 4096, 1.7e9);
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->cpu_seconds, 3.0);
  EXPECT_DOUBLE_EQ(s->start_time_seconds, 1.7e9 + 10.0);
  EXPECT_DOUBLE_EQ(s->virtual_bytes, 123456789.0);
  EXPECT_DOUBLE_EQ(s->resident_bytes, 2000.0 * 4096);
}

TEST(ProcessMetrics, RejectsLinesThatAreNotStatLines) {
  EXPECT_FALSE(parse_proc_stat("", 100, 4096, 0));
  EXPECT_FALSE(parse_proc_stat("4242 cadenza S 1 2 3", 100, 4096, 0));           // no ')'
  EXPECT_FALSE(parse_proc_stat("4242 (cadenza) S 1 4242 4242 0 -1", 100, 4096, 0));  // short
  std::string garbled = kStat;
  garbled.replace(garbled.find(" 250 "), 5, " 2x0 ");
  EXPECT_FALSE(parse_proc_stat(garbled, 100, 4096, 0));
  EXPECT_FALSE(parse_proc_stat(kStat, 0, 4096, 0));  // no clock rate
}

TEST(ProcessMetrics, ReadsThisProcess) {
  auto s = read_process_stats();
  ASSERT_TRUE(s) << "/proc/self/stat unreadable";
  EXPECT_GT(s->resident_bytes, 1 << 20);
  EXPECT_GE(s->virtual_bytes, s->resident_bytes);
  EXPECT_GE(s->open_fds, 3);  // stdin, stdout, stderr
  EXPECT_NE(s->max_fds, 0);
  EXPECT_GT(s->start_time_seconds, 1.6e9);  // after 2020
  std::string out;
  write_process_metrics(out, *s);
  for (const char* name : {"process_cpu_seconds_total", "process_open_fds", "process_max_fds",
                           "process_virtual_memory_bytes", "process_resident_memory_bytes",
                           "process_start_time_seconds"}) {
    EXPECT_NE(out.find(std::string("# TYPE ") + name), std::string::npos) << name;
    EXPECT_NE(out.find(std::string("\n") + name + " "), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace cadenza::wire
