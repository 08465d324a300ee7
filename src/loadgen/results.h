// Result files of `cadenza bench serve --json` (read back by `bench compare` and the report) and
// their rendering as text tables.
//
// File format (JSON object):
//   {"format": "cadenza-bench-serve", "version": 1, "name": "...", "config": {...},
//    "points": [{"label": "c=4", "concurrency": 4, "request_rate": 0, "summary": {...},
//                "requests": [{"index", "start_ms", "ttft_ms", "e2e_ms", "tpot_ms", "chunk_ms",
//                              "prompt_tokens", "output_tokens", "output_source", "max_tokens",
//                              "error", ["http_status"], ["message"]}, ...],
//                "spec_decode": {...} or null}, ...]}
// A single run has one point; a sweep one per concurrency or rate. Times are milliseconds;
// -1 marks an undefined value (no first chunk, fewer than two tokens).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loadgen/metrics.h"
#include "loadgen/spec_metrics.h"
#include "util/result.h"

namespace cadenza::loadgen {

struct PointResult {
  std::string label;        // "c=4", "rate=2", "rate=inf", or "run"
  int32_t concurrency = 0;  // 0: none (open loop without a cap)
  double request_rate = 0;  // 0: closed loop; infinity: burst
  Summary summary;
  nlohmann::json requests = nlohmann::json::array();
  // Latency samples of successful requests (ms), for CDFs.
  std::vector<double> ttft_ms, tpot_ms, itl_ms, e2e_ms;
  // The server's speculative-decoding counters over the point (its /metrics before and after);
  // nullopt when it has none or no draft happened.
  std::optional<SpecDecode> spec_decode;
};

struct ResultFile {
  std::string name;  // shown in reports and comparisons (default: the file's name)
  nlohmann::json config = nlohmann::json::object();
  std::vector<PointResult> points;
};

PointResult make_point(std::string label, int32_t concurrency, double request_rate,
                       const RunResult& run, const SloOptions& slo);

nlohmann::json to_json(const ResultFile& file);
// Errors: unreadable file, not JSON, not a bench-serve result (naming the file).
Result<ResultFile> load_result_file(const std::string& path);
Status save_result_file(const ResultFile& file, const std::string& path);

// "inf" for infinity, else the shortest decimal form.
std::string format_rate(double rate);

// Detailed table of one point (throughputs, latency distributions, errors, CPU, and the
// speculation section when the point has spec_decode).
void print_summary(std::FILE* out, const PointResult& point);
// The speculation section of print_summary.
void print_spec_decode(std::FILE* out, const SpecDecode& spec);
// One row per point: the sweep / comparison table. `names` (same length) prefixes each row when
// non-empty. When any point has spec_decode, two more columns: acceptance rate and mean tokens
// per verification ("-" for points without).
void print_table(std::FILE* out, const std::vector<const PointResult*>& points,
                 const std::vector<std::string>& names = {});

}  // namespace cadenza::loadgen
