// The numbers a run is judged by, computed from the client-side records (see docs/bench-serve.md
// for the definitions).
//
//  TTFT  request start -> first token chunk              (successful requests)
//  ITL   gap between consecutive token chunks            (all gaps of successful requests)
//  TPOT  (E2E - TTFT) / (output tokens - 1)              (successful requests with >= 2 tokens)
//  E2E   request start -> end of the response            (successful requests)
//  Throughputs divide totals of successful requests by the run's duration (start of the run ->
//  last response ended). Goodput counts only requests meeting every SLO given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "loadgen/runner.h"
#include "loadgen/stats.h"

namespace cadenza::loadgen {

struct SloOptions {
  double ttft_ms = 0;  // 0: no TTFT objective
  double tpot_ms = 0;  // 0: no TPOT objective
  bool any() const { return ttft_ms > 0 || tpot_ms > 0; }
};

struct Summary {
  size_t completed = 0;
  size_t failed = 0;
  double duration_s = 0;
  int64_t input_tokens = 0;  // sum over successful requests
  int64_t output_tokens = 0;
  // Token chunks received (ChunkInfo::token), successful requests. Equal to output_tokens for a
  // server that streams one chunk per token; fewer when it packs tokens (ITL then covers several).
  int64_t output_chunks = 0;
  double request_throughput = 0;      // successful requests / s
  double input_token_throughput = 0;  // tokens / s
  double output_token_throughput = 0;
  bool has_slo = false;
  size_t good_requests = 0;
  double goodput = 0;  // good requests / s
  Distribution ttft_ms, tpot_ms, itl_ms, e2e_ms;
  std::map<std::string, size_t> errors;  // kind -> count (only kinds that occurred)
  std::string output_source;             // how output tokens were counted
  double cpu_s = 0;                      // the load generator's CPU time during the run
  double cpu_ms_per_request = 0;
  double cpu_utilization = 0;  // cpu_s / duration_s (1.0 = one core busy)
  size_t connections_opened = 0;
};

Summary summarize_run(const RunResult& run, const SloOptions& slo);

void to_json(nlohmann::json& j, const Summary& s);
void from_json(const nlohmann::json& j, Summary& s);  // missing fields keep their defaults

}  // namespace cadenza::loadgen
