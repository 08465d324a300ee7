#include "wire/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "wire/exposition.h"

namespace cadenza::wire {
namespace {

std::string read_file(const char* path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<double> to_double(std::string_view field) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
  if (ec != std::errc() || ptr != field.data() + field.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<ProcessStats> parse_proc_stat(std::string_view stat, double ticks_per_second,
                                            double page_bytes, double boot_time) {
  // "pid (comm) state ppid ...": field 3 (state) is the first after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos || ticks_per_second <= 0) return std::nullopt;
  std::vector<std::string_view> fields;  // fields[0] is field 3 of proc(5)
  std::string_view rest = stat.substr(close + 1);
  while (!rest.empty()) {
    const size_t start = rest.find_first_not_of(" \n");
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    const size_t end = rest.find_first_of(" \n");
    fields.push_back(rest.substr(0, end));
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end);
  }
  // proc(5) numbering: utime 14, stime 15, starttime 22, vsize 23, rss 24.
  auto field = [&](size_t n) { return n - 3 < fields.size() ? to_double(fields[n - 3]) : std::nullopt; };
  const auto utime = field(14), stime = field(15), start = field(22), vsize = field(23),
             rss = field(24);
  if (!utime || !stime || !start || !vsize || !rss) return std::nullopt;
  ProcessStats s;
  s.cpu_seconds = (*utime + *stime) / ticks_per_second;
  s.start_time_seconds = boot_time + *start / ticks_per_second;
  s.virtual_bytes = *vsize;
  s.resident_bytes = *rss * page_bytes;
  return s;
}

std::optional<ProcessStats> read_process_stats() {
  const std::string stat = read_file("/proc/self/stat");
  if (stat.empty()) return std::nullopt;
  double boot_time = 0;
  {
    std::istringstream lines(read_file("/proc/stat"));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("btime ", 0) == 0) {
        boot_time = to_double(std::string_view(line).substr(6)).value_or(0);
        break;
      }
    }
  }
  auto s = parse_proc_stat(stat, static_cast<double>(sysconf(_SC_CLK_TCK)),
                           static_cast<double>(sysconf(_SC_PAGESIZE)), boot_time);
  if (!s) return std::nullopt;
  std::error_code ec;
  double fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++fds;
  }
  // The iterator's own descriptor is among those it listed.
  s->open_fds = fds > 0 ? fds - 1 : 0;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0)
    s->max_fds = limit.rlim_cur == RLIM_INFINITY ? -1 : static_cast<double>(limit.rlim_cur);
  return s;
}

void write_process_metrics(std::string& out, const ProcessStats& s) {
  struct Family {
    const char* name;
    MetricType type;
    const char* help;
    double value;
  };
  const Family families[] = {
      {"process_cpu_seconds_total", MetricType::counter,
       "Total user and system CPU time spent in seconds.", s.cpu_seconds},
      {"process_open_fds", MetricType::gauge, "Number of open file descriptors.", s.open_fds},
      {"process_max_fds", MetricType::gauge, "Maximum number of open file descriptors.",
       s.max_fds},
      {"process_virtual_memory_bytes", MetricType::gauge, "Virtual memory size in bytes.",
       s.virtual_bytes},
      {"process_resident_memory_bytes", MetricType::gauge, "Resident memory size in bytes.",
       s.resident_bytes},
      {"process_start_time_seconds", MetricType::gauge,
       "Start time of the process since unix epoch in seconds.", s.start_time_seconds},
  };
  for (const Family& f : families) {
    write_header(out, f.name, f.type, f.help);
    write_sample(out, f.name, {}, f.value);
  }
}

void append_process_metrics(std::string& out) {
  if (auto s = read_process_stats()) write_process_metrics(out, *s);
}

}  // namespace cadenza::wire
