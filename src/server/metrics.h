// Metrics registry: counters, gauges and histograms rendered in the Prometheus text exposition
// format 0.0.4 (HELP and TYPE lines, `name{label="value"} number`, histogram _bucket/_sum/_count).
//
// Names follow vLLM's with a `cadenza_` prefix (see docs/server.md for the list).
// Ownership: plain values. Thread-safety: every method may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace cadenza::server {

// Values the engine thread publishes after each step (read at scrape time).
struct EngineGauges {
  int32_t num_running = 0;
  int32_t num_waiting = 0;  // engine waiting + submitted but not yet in the engine
  double kv_usage = 0;
  int64_t num_preemptions = 0;
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  // MoE routing statistics: tokens routed to each expert, [layer][expert] row-major
  // (moe_layers x moe_experts; empty for dense models).
  int64_t moe_layers = 0;
  int64_t moe_experts = 0;
  std::vector<uint64_t> expert_tokens;
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends `name_bucket{le=...}`, `name_sum`, `name_count` lines.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last: +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  // Per finished request (the engine thread calls these).
  void observe_ttft(double s);
  void observe_inter_token(double s);
  void observe_e2e(double s);
  void observe_queue_time(double s);
  void add_prompt_tokens(int64_t n);
  void add_generation_tokens(int64_t n);
  void add_request_finished(const std::string& finished_reason);
  void set_engine_gauges(const EngineGauges& g);

  // Per HTTP response (the I/O threads call this). `route` must come from a fixed set.
  void add_http_request(const std::string& route, int status);

  // The whole exposition text.
  std::string render() const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_, itl_, e2e_, queue_;
  int64_t prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
  std::map<std::string, int64_t> finished_;
  std::map<std::pair<std::string, int>, int64_t> http_;
  EngineGauges gauges_;
};

}  // namespace cadenza::server
