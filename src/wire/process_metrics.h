// The process_* metric families every Prometheus client library exports, read from Linux's /proc
// for the calling process: resident and virtual memory, CPU seconds, open and allowed file
// descriptors, start time. `cadenza serve` and `cadenza gateway` append them to GET /metrics, so
// dashboards and alerts watch memory and descriptor leaks without a node exporter.
// Thread-safety: pure reads of /proc; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cadenza::wire {

struct ProcessStats {
  double cpu_seconds = 0;         // user + system
  double start_time_seconds = 0;  // Unix time the process started
  double resident_bytes = 0;
  double virtual_bytes = 0;
  double open_fds = 0;
  double max_fds = 0;             // the soft RLIMIT_NOFILE
};

// Parses the contents of /proc/PID/stat (fields after the parenthesised command name, which may
// itself hold spaces and parentheses). `ticks_per_second` is sysconf(_SC_CLK_TCK), `page_bytes`
// the page size, `boot_time` the `btime` line of /proc/stat (Unix seconds). Fills cpu, start
// time, resident and virtual memory; nullopt when the text is not a stat line.
std::optional<ProcessStats> parse_proc_stat(std::string_view stat, double ticks_per_second,
                                            double page_bytes, double boot_time);

// This process's figures; nullopt where /proc is unreadable (not Linux, a restricted sandbox).
std::optional<ProcessStats> read_process_stats();

// Appends the six families (HELP, TYPE, one sample each) for `s` to `out`.
void write_process_metrics(std::string& out, const ProcessStats& s);

// read_process_stats() then write_process_metrics(); appends nothing when /proc is unreadable.
void append_process_metrics(std::string& out);

}  // namespace cadenza::wire
