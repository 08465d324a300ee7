// `cadenza bench serve` and `cadenza bench compare`, independent of the command-line parser so
// that tests can run them directly (bench_serve_cli.h binds them to CLI11).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "loadgen/metrics.h"
#include "loadgen/openai_api.h"
#include "loadgen/workload.h"

namespace cadenza::loadgen {

struct ServeOptions {
  std::string url = "http://127.0.0.1:8080";
  std::string model;
  ApiKind api = ApiKind::chat;
  std::string api_key;
  std::string request_rate;  // "" (closed loop), a number or "inf"
  int32_t concurrency = 0;   // 0: 1 for closed loop, no cap for open loop
  size_t num_requests = 0;   // 0: 100, or unlimited with a duration
  double duration_s = 0;
  int32_t warmup = 0;
  WorkloadOptions workload;
  bool ignore_eos = false;
  double temperature = 0;  // sent with every request (0: greedy)
  double top_p = -1;       // sent when >= 0
  int32_t top_k = -1;      // sent when >= 0
  std::string tokenizer;  // GGUF whose tokenizer builds prompts (and counts tokens without usage)
  double timeout_s = 600;
  SloOptions slo;
  std::string json_path;
  std::string sweep_concurrency;
  std::string sweep_rate;
  std::string report_path;
  std::string name;    // result name in reports (default: the model name)
  bool quiet = false;  // no per-point detail tables
};

// Runs the benchmark (every sweep point), prints the tables to `out`, writes --json/--report.
// Returns the process exit code: 0 when the run completed (even with failed requests; they are
// reported), 1 on a configuration or I/O error (message on stderr).
int run_bench_serve(const ServeOptions& options, std::FILE* out = stdout);

// Prints a table of every point of every file and writes the overlay report when report_path is
// given. Returns 0, or 1 when a file cannot be read.
int run_bench_compare(const std::vector<std::string>& files, const std::string& report_path,
                      std::FILE* out = stdout);

}  // namespace cadenza::loadgen
