// The server's metrics: counters, gauges and histograms in a wire::Registry (src/wire), rendered
// as the Prometheus text exposition format 0.0.4 on GET /metrics.
//
// Names follow vLLM's with a `cadenza_` prefix (see docs/server.md for the list).
// `model`: empty for the one model of `serve -m FILE` (series without a model label, as always);
// in router mode (several models, server/model_pool.h) the per-request series and the engine
// gauges carry a `model` label with the served name.
// Ownership: plain values. Thread-safety: every method may be called from any thread.
#pragma once

#include "kv/kv_tier.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "wire/registry.h"

namespace cadenza::server {

// One rank of a model split across processes (docs/distributed.md): its communication totals
// per operation and the (token, expert) pairs its experts computed.
struct RankGauges {
  int32_t rank = 0;
  struct Op {
    std::string name;  // "all_reduce", "broadcast", ...
    uint64_t calls = 0;
    uint64_t bytes = 0;
    double seconds = 0;
  };
  std::vector<Op> ops;
  uint64_t expert_tokens = 0;
};

// Values the engine thread publishes after each step (read at scrape time).
struct EngineGauges {
  int32_t num_running = 0;
  int32_t num_waiting = 0;  // engine waiting + submitted but not yet in the engine
  double kv_usage = 0;
  int64_t num_preemptions = 0;
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  // Speculative decoding (engine::EngineStats' num_spec_*): verification passes with drafts,
  // draft tokens, accepted draft tokens. 0 when speculation is off.
  int64_t spec_num_drafts = 0;
  int64_t spec_num_draft_tokens = 0;
  int64_t spec_num_accepted_tokens = 0;
  // engine::EngineStats' step_*_s: wall seconds of engine steps by phase.
  double step_schedule_s = 0;
  double step_forward_s = 0;
  double step_sample_s = 0;
  // Accepted draft tokens by draft position (0-based), for each position that ever had a draft.
  std::vector<int64_t> spec_accepted_per_position;
  // MoE routing statistics: tokens routed to each expert, [layer][expert] row-major
  // (moe_layers x moe_experts; empty for dense models).
  int64_t moe_layers = 0;
  int64_t moe_experts = 0;
  std::vector<uint64_t> expert_tokens;
  // KV tiers below the pool (engine::EngineStats::kv_tiers), fastest first; empty without tiers.
  struct KvTier {
    std::string tier;  // "memory" or "disk"
    kv::KvTierStats stats;
  };
  std::vector<KvTier> kv_tiers;
  // Split models: one entry per rank (empty in one process); the last heartbeat's round trip.
  std::vector<RankGauges> ranks;
  double heartbeat_seconds = 0;
};

class Metrics {
 public:
  Metrics();

  // Per finished request (the engine thread calls these).
  void observe_ttft(double s, const std::string& model = {});
  void observe_inter_token(double s, const std::string& model = {});
  void observe_e2e(double s, const std::string& model = {});
  void observe_queue_time(double s, const std::string& model = {});
  void add_prompt_tokens(int64_t n, const std::string& model = {});
  void add_generation_tokens(int64_t n, const std::string& model = {});
  void add_request_finished(const std::string& finished_reason, const std::string& model = {});
  void set_engine_gauges(const EngineGauges& g, const std::string& model = {});
  // Router mode: the model was unloaded; its engine gauges go (its counters stay).
  void forget_engine_gauges(const std::string& model);

  // Router mode (the loader thread): models loaded now, and each load's and unload's outcome.
  // `result`: "ok" or "error"; `reason`: "lru", "memory", "idle".
  void set_models_loaded(int64_t n);
  void add_model_load(const std::string& model, const std::string& result, double seconds);
  void add_model_unload(const std::string& model, const std::string& reason);

  // Per HTTP response (the I/O threads call this). `route` must come from a fixed set.
  void add_http_request(const std::string& route, int status);
  // A submission refused (429) by the time-to-first-token objective (server/ttft_admission.h).
  void add_ttft_refusal(const std::string& model = {});
  // One image of a request (server/vision_service.h): from the encoder-output cache or encoded
  // in `encode_seconds`; `tokens` of the prompt are its embeddings.
  void add_vision_image(bool cached, int64_t tokens, double encode_seconds);

  // The whole exposition text (the engine gauges as last published).
  std::string render() const;

 private:
  // Copies one model's snapshot into the registry (render, under gauges_mu_).
  void set_snapshot(const EngineGauges& g, const std::string& model) const;
  // The engine's snapshot is copied into the registry at render time, not at every step.
  mutable std::mutex gauges_mu_;
  std::map<std::string, EngineGauges> gauges_;  // by model ("" for the one model)
  mutable wire::Registry registry_;
};

}  // namespace cadenza::server
