// One load-test run: sends the workload to an OpenAI-compatible server, open loop (Poisson or
// burst arrivals) or closed loop (C workers, one request in flight each), and records what each
// streamed response looked like on the client.
//
// Timestamps (steady clock) are taken in the io_context thread as each piece of the body is
// read: a request's clock starts just before its connection is taken from the pool (or opened) and
// the request written, so TTFT includes connecting when no idle keep-alive connection exists.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "loadgen/http_client.h"
#include "loadgen/openai_api.h"
#include "loadgen/workload.h"
#include "util/result.h"

namespace cadenza {
class Tokenizer;
}

namespace cadenza::loadgen {

struct RequestRecord {
  size_t index = 0;                      // position in the run, in order of sending
  double start_s = 0;                    // when sent, seconds after the run's first request
  double ttft_s = -1;                    // first token chunk after start; -1: none arrived
  double e2e_s = 0;                      // end of the response after start
  std::vector<double> chunk_s;           // arrival of each token chunk (ChunkInfo::token) after
                                         // start, ascending; empty-text token chunks included
  int32_t prompt_tokens = 0;             // server usage when sent, else the workload's count
  int32_t output_tokens = 0;             // see output_source
  // "usage" (the server's usage.completion_tokens), else "tokenizer" (the streamed text
  // re-encoded with --tokenizer), else "chunks" (token chunks counted).
  const char* output_source = "chunks";
  int32_t usage_output_tokens = -1;      // the server's usage.completion_tokens; -1: not sent
  int32_t max_tokens = 0;
  ErrorKind error = ErrorKind::none;
  int http_status = 0;
  std::string message;  // why it failed

  bool ok() const { return error == ErrorKind::none; }
  // (e2e - ttft) / (output_tokens - 1); -1 when undefined (failed, or fewer than 2 tokens).
  double tpot_s() const;
};

void to_json(nlohmann::json& j, const RequestRecord& r);  // times in milliseconds

struct RunConfig {
  std::string url;
  RequestOptions request;
  std::string api_key;
  // 0: closed loop with `concurrency` workers. > 0: open loop, Poisson at this rate (infinity:
  // every request at once); `concurrency` > 0 then caps the requests in flight.
  double request_rate = 0;
  int32_t concurrency = 1;
  size_t num_requests = 0;  // 0 (only with duration_s > 0): no limit
  double duration_s = 0;    // > 0: no new requests after this many seconds
  int32_t warmup = 0;       // requests sent (closed loop) and discarded before the run
  double timeout_s = 600;   // per request, connecting included
  uint64_t seed = 0;
  // Non-empty (e.g. "/metrics"): GET this path on the server just before the measured requests
  // (after the warm-up) and just after them (RunResult::metrics_before / metrics_after).
  std::string metrics_target;
};

// One GET of RunConfig::metrics_target.
struct MetricsScrape {
  bool ok = false;
  std::string body;   // the page, when ok
  std::string error;  // why not, when !ok (empty: not scraped)
};

struct RunResult {
  std::deque<RequestRecord> records;  // in order of sending
  double duration_s = 0;              // start of the run -> last response ended
  double cpu_s = 0;  // user + system CPU of this process during the run (getrusage)
  size_t connections_opened = 0;
  MetricsScrape metrics_before, metrics_after;  // only with RunConfig::metrics_target
};

// Runs `items` (cycled when the run is longer than the list). `tokenizer` (may be null) counts
// output tokens from the streamed text when the server sends no usage. Errors: a bad URL or
// configuration (no items, no request or duration limit); failed requests and failed metrics
// scrapes are recorded, not errors.
Result<RunResult> run_load(const RunConfig& config, const std::vector<WorkItem>& items,
                           const std::vector<WorkItem>& warmup_items, const Tokenizer* tokenizer);

}  // namespace cadenza::loadgen
