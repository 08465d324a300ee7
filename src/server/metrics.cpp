#include "server/metrics.h"

#include "wire/process_metrics.h"

namespace cadenza::server {
namespace {

using wire::MetricType;
using wire::WhenEmpty;

constexpr const char* kRunning = "cadenza_num_requests_running";
constexpr const char* kWaiting = "cadenza_num_requests_waiting";
constexpr const char* kKvUsage = "cadenza_kv_cache_usage_ratio";
constexpr const char* kPromptTokens = "cadenza_prompt_tokens_total";
constexpr const char* kGenerationTokens = "cadenza_generation_tokens_total";
constexpr const char* kPrefixQueries = "cadenza_prefix_cache_queries_total";
constexpr const char* kPrefixHits = "cadenza_prefix_cache_hits_total";
constexpr const char* kPreemptions = "cadenza_num_preemptions_total";
constexpr const char* kTierBytes = "cadenza_kv_tier_bytes";
constexpr const char* kTierCapacity = "cadenza_kv_tier_capacity_bytes";
constexpr const char* kTierBlocks = "cadenza_kv_tier_blocks";
constexpr const char* kTierHits = "cadenza_kv_tier_hits_total";
constexpr const char* kTierPromotions = "cadenza_kv_tier_promotions_total";
constexpr const char* kTierDemotions = "cadenza_kv_tier_demotions_total";
constexpr const char* kTierEvictions = "cadenza_kv_tier_evictions_total";
constexpr const char* kTierRejected = "cadenza_kv_tier_rejected_total";
constexpr const char* kSpecDrafts = "cadenza_spec_decode_num_drafts_total";
constexpr const char* kSpecDraftTokens = "cadenza_spec_decode_num_draft_tokens_total";
constexpr const char* kSpecAccepted = "cadenza_spec_decode_num_accepted_tokens_total";
constexpr const char* kSpecAcceptedPerPos = "cadenza_spec_decode_num_accepted_tokens_per_pos_total";
constexpr const char* kStepSeconds = "cadenza_engine_step_seconds_total";
constexpr const char* kExpertTokens = "cadenza_moe_expert_tokens_total";
constexpr const char* kDistWorld = "cadenza_dist_world_size";
constexpr const char* kDistHeartbeat = "cadenza_dist_heartbeat_seconds";
constexpr const char* kDistSeconds = "cadenza_dist_seconds_total";
constexpr const char* kDistBytes = "cadenza_dist_bytes_total";
constexpr const char* kDistCalls = "cadenza_dist_calls_total";
constexpr const char* kDistExpertTokens = "cadenza_dist_expert_tokens_total";
constexpr const char* kFinished = "cadenza_request_success_total";
constexpr const char* kHttp = "cadenza_http_requests_total";
constexpr const char* kTtft = "cadenza_time_to_first_token_seconds";
constexpr const char* kItl = "cadenza_inter_token_latency_seconds";
constexpr const char* kE2e = "cadenza_e2e_request_latency_seconds";
constexpr const char* kQueue = "cadenza_request_queue_time_seconds";
constexpr const char* kModelsLoaded = "cadenza_models_loaded";
constexpr const char* kModelLoads = "cadenza_model_loads_total";
constexpr const char* kModelUnloads = "cadenza_model_unloads_total";
constexpr const char* kModelLoadSeconds = "cadenza_model_load_seconds";
constexpr const char* kTtftRefusals = "cadenza_ttft_admission_refusals_total";
constexpr const char* kVisionEncode = "cadenza_vision_encode_seconds";
constexpr const char* kVisionImages = "cadenza_vision_images_total";
constexpr const char* kVisionImageTokens = "cadenza_vision_image_tokens_total";

// The one model's series have no labels; a pooled model's carry model="name".
wire::Labels model_labels(const std::string& model) {
  if (model.empty()) return {};
  return {{"model", model}};
}
wire::Labels with_model(const std::string& model, wire::Labels labels) {
  if (!model.empty()) labels.insert(labels.begin(), {"model", model});
  return labels;
}

// vLLM's buckets.
const std::vector<double> kRequestSeconds = {0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,
                                             5.0,  10.0, 15.0, 20.0,  30.0,  40.0,  50.0,
                                             60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

}  // namespace

Metrics::Metrics() {
  wire::Registry& r = registry_;
  // Declaration order is the exposition's order: gauges, counters, histograms.
  r.declare(kRunning, MetricType::gauge, "Requests in the running batch.", WhenEmpty::zero);
  r.declare(kWaiting, MetricType::gauge, "Requests waiting to be scheduled.", WhenEmpty::zero);
  r.declare(kKvUsage, MetricType::gauge, "Fraction of KV cache blocks in use (0 to 1).",
            WhenEmpty::zero);
  r.declare(kPromptTokens, MetricType::counter, "Prompt tokens of finished requests.",
            WhenEmpty::zero);
  r.declare(kGenerationTokens, MetricType::counter, "Generated tokens of finished requests.",
            WhenEmpty::zero);
  r.declare(kPrefixQueries, MetricType::counter, "Prefix cache lookups.", WhenEmpty::zero);
  r.declare(kPrefixHits, MetricType::counter,
            "Prefix cache lookups that found at least one block.", WhenEmpty::zero);
  r.declare(kPreemptions, MetricType::counter, "Requests preempted (KV recompute).",
            WhenEmpty::zero);
  // KV tiers below the pool (--kv-offload-memory, --kv-disk-dir): absent without them.
  r.declare(kTierBytes, MetricType::gauge, "Bytes held by each KV tier.", WhenEmpty::omit);
  r.declare(kTierCapacity, MetricType::gauge, "Byte budget of each KV tier.", WhenEmpty::omit);
  r.declare(kTierBlocks, MetricType::gauge, "KV blocks held by each KV tier.", WhenEmpty::omit);
  r.declare(kTierHits, MetricType::counter, "Prefix-cache blocks found in each KV tier.",
            WhenEmpty::omit);
  r.declare(kTierPromotions, MetricType::counter,
            "KV blocks copied from each tier back into the KV pool.", WhenEmpty::omit);
  r.declare(kTierDemotions, MetricType::counter,
            "KV blocks stored in each tier (evicted from the pool or the tier above).",
            WhenEmpty::omit);
  r.declare(kTierEvictions, MetricType::counter,
            "KV blocks each tier dropped or passed down to stay within its budget.",
            WhenEmpty::omit);
  r.declare(kTierRejected, MetricType::counter,
            "Disk tier files skipped as damaged, truncated or another model's.", WhenEmpty::omit);
  // vLLM's names and meaning; 0 while speculation is off.
  r.declare(kSpecDrafts, MetricType::counter,
            "Speculative decoding: verification passes of a request with draft tokens.",
            WhenEmpty::zero);
  r.declare(kSpecDraftTokens, MetricType::counter, "Speculative decoding: draft tokens verified.",
            WhenEmpty::zero);
  r.declare(kSpecAcceptedPerPos, MetricType::counter,
            "Speculative decoding: accepted draft tokens by draft position (0-based).");
  r.declare(kSpecAccepted, MetricType::counter, "Speculative decoding: draft tokens accepted.",
            WhenEmpty::zero);
  r.declare(kStepSeconds, MetricType::counter,
            "Wall seconds of engine steps by phase: schedule, forward (the model), sample "
            "(logits processing, sampling, detokenization, stops).");
  // Dense models export no expert series at all.
  r.declare(kExpertTokens, MetricType::counter,
            "Tokens routed to each expert, per layer (each token counts once per expert it uses).",
            WhenEmpty::omit);
  // Split models only (docs/distributed.md); one process exports none of these.
  r.declare(kDistWorld, MetricType::gauge, "Processes the model is split across.",
            WhenEmpty::omit);
  r.declare(kDistHeartbeat, MetricType::gauge,
            "Round trip of the last heartbeat from the driver to every worker.", WhenEmpty::omit);
  r.declare(kDistSeconds, MetricType::counter,
            "Seconds each rank spent in each communication operation, waiting included "
            "(workers: as of the last heartbeat).", WhenEmpty::omit);
  r.declare(kDistBytes, MetricType::counter,
            "Payload bytes each rank sent (collectives: the buffer size) per operation.",
            WhenEmpty::omit);
  r.declare(kDistCalls, MetricType::counter, "Communication operations per rank and kind.",
            WhenEmpty::omit);
  r.declare(kDistExpertTokens, MetricType::counter,
            "(token, expert) pairs computed by the experts each rank holds (MoE).",
            WhenEmpty::omit);
  r.declare(kFinished, MetricType::counter, "Finished requests by finish reason.");
  r.declare(kHttp, MetricType::counter, "HTTP responses by route and status.");
  r.declare(kTtft, MetricType::histogram, "Time from arrival to the first generated token.",
            WhenEmpty::zero,
            {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
             10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0});
  r.declare(kItl, MetricType::histogram, "Time between consecutive generated tokens.",
            WhenEmpty::zero,
            {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
             10.0, 20.0, 40.0, 80.0});
  r.declare(kE2e, MetricType::histogram, "Time from submission to the end of the request.",
            WhenEmpty::zero, kRequestSeconds);
  r.declare(kQueue, MetricType::histogram, "Time from arrival to the first schedule.",
            WhenEmpty::zero, kRequestSeconds);
  // Router mode only (server/model_pool.h): absent from a one-model server's exposition.
  r.declare(kModelsLoaded, MetricType::gauge, "Models loaded now (router mode).", WhenEmpty::omit);
  r.declare(kModelLoads, MetricType::counter, "Model loads by model and result (router mode).",
            WhenEmpty::omit);
  r.declare(kModelUnloads, MetricType::counter,
            "Model unloads by model and reason: lru, memory, idle (router mode).", WhenEmpty::omit);
  r.declare(kModelLoadSeconds, MetricType::histogram,
            "Time to load a model, successful or not (router mode).", WhenEmpty::omit,
            {0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0});
  r.declare(kTtftRefusals, MetricType::counter,
            "Requests refused (429) because their predicted time to first token exceeded "
            "--ttft-slo-factor times the idle prediction.", WhenEmpty::omit);
  // Image inputs (serve --mmproj, server/vision_service.h): absent without an mmproj.
  r.declare(kVisionEncode, MetricType::histogram,
            "Time to encode one image with the vision encoder (cache misses only).",
            WhenEmpty::omit, {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0});
  r.declare(kVisionImages, MetricType::counter,
            "Images in requests by source: encoded (the encoder ran) or cached (the encoder-output "
            "cache had it).", WhenEmpty::omit);
  r.declare(kVisionImageTokens, MetricType::counter,
            "Prompt tokens that are image embeddings.", WhenEmpty::omit);
  // The usual finish reasons are listed (at 0) from the start.
  for (const char* reason : {"stop", "length", "abort", "error"})
    r.set(kFinished, {{"finished_reason", reason}}, 0);
}

void Metrics::observe_ttft(double s, const std::string& model) {
  registry_.observe(kTtft, model_labels(model), s);
}
void Metrics::observe_inter_token(double s, const std::string& model) {
  registry_.observe(kItl, model_labels(model), s);
}
void Metrics::observe_e2e(double s, const std::string& model) {
  registry_.observe(kE2e, model_labels(model), s);
}
void Metrics::observe_queue_time(double s, const std::string& model) {
  registry_.observe(kQueue, model_labels(model), s);
}
void Metrics::add_prompt_tokens(int64_t n, const std::string& model) {
  registry_.inc(kPromptTokens, model_labels(model), static_cast<double>(n));
}
void Metrics::add_generation_tokens(int64_t n, const std::string& model) {
  registry_.inc(kGenerationTokens, model_labels(model), static_cast<double>(n));
}
void Metrics::add_request_finished(const std::string& reason, const std::string& model) {
  registry_.inc(kFinished, with_model(model, {{"finished_reason", reason}}));
}
void Metrics::set_engine_gauges(const EngineGauges& g, const std::string& model) {
  std::lock_guard lock(gauges_mu_);
  gauges_[model] = g;
}
void Metrics::forget_engine_gauges(const std::string& model) {
  std::lock_guard lock(gauges_mu_);
  gauges_.erase(model);
}
void Metrics::set_models_loaded(int64_t n) {
  registry_.set(kModelsLoaded, {}, static_cast<double>(n));
}
void Metrics::add_model_load(const std::string& model, const std::string& result, double seconds) {
  registry_.inc(kModelLoads, {{"model", model}, {"result", result}});
  registry_.observe(kModelLoadSeconds, {}, seconds);
}
void Metrics::add_model_unload(const std::string& model, const std::string& reason) {
  registry_.inc(kModelUnloads, {{"model", model}, {"reason", reason}});
}
void Metrics::add_vision_image(bool cached, int64_t tokens, double encode_seconds) {
  registry_.inc(kVisionImages, {{"source", cached ? "cached" : "encoded"}});
  registry_.inc(kVisionImageTokens, {}, static_cast<double>(tokens));
  if (!cached) registry_.observe(kVisionEncode, {}, encode_seconds);
}
void Metrics::add_ttft_refusal(const std::string& model) {
  registry_.inc(kTtftRefusals, model_labels(model));
}
void Metrics::add_http_request(const std::string& route, int status) {
  registry_.inc(kHttp, {{"route", route}, {"status", std::to_string(status)}});
}

void Metrics::set_snapshot(const EngineGauges& g, const std::string& model) const {
  const wire::Labels m = model_labels(model);
  registry_.set(kRunning, m, g.num_running);
  registry_.set(kWaiting, m, g.num_waiting);
  registry_.set(kKvUsage, m, g.kv_usage);
  registry_.set(kPrefixQueries, m, static_cast<double>(g.prefix_cache_queries));
  registry_.set(kPrefixHits, m, static_cast<double>(g.prefix_cache_hits));
  registry_.set(kPreemptions, m, static_cast<double>(g.num_preemptions));
  registry_.set(kSpecDrafts, m, static_cast<double>(g.spec_num_drafts));
  registry_.set(kSpecDraftTokens, m, static_cast<double>(g.spec_num_draft_tokens));
  registry_.set(kSpecAccepted, m, static_cast<double>(g.spec_num_accepted_tokens));
  registry_.set(kStepSeconds, with_model(model, {{"phase", "schedule"}}), g.step_schedule_s);
  registry_.set(kStepSeconds, with_model(model, {{"phase", "forward"}}), g.step_forward_s);
  registry_.set(kStepSeconds, with_model(model, {{"phase", "sample"}}), g.step_sample_s);
  for (size_t i = 0; i < g.spec_accepted_per_position.size(); ++i)
    registry_.set(kSpecAcceptedPerPos, with_model(model, {{"position", std::to_string(i)}}),
                  static_cast<double>(g.spec_accepted_per_position[i]));
  for (const EngineGauges::KvTier& t : g.kv_tiers) {
    const wire::Labels l = with_model(model, {{"tier", t.tier}});
    registry_.set(kTierBytes, l, static_cast<double>(t.stats.bytes));
    registry_.set(kTierCapacity, l, static_cast<double>(t.stats.capacity_bytes));
    registry_.set(kTierBlocks, l, static_cast<double>(t.stats.blocks));
    registry_.set(kTierHits, l, static_cast<double>(t.stats.hits));
    registry_.set(kTierPromotions, l, static_cast<double>(t.stats.promotions));
    registry_.set(kTierDemotions, l, static_cast<double>(t.stats.demotions));
    registry_.set(kTierEvictions, l, static_cast<double>(t.stats.evictions));
    registry_.set(kTierRejected, l, static_cast<double>(t.stats.rejected));
  }
}

std::string Metrics::render() const {
  std::lock_guard lock(gauges_mu_);  // one snapshot per render, even with concurrent scrapes
  // The snapshot families are rebuilt from the models loaded now (an unloaded model's go).
  for (const char* name : {kRunning, kWaiting, kKvUsage, kPrefixQueries, kPrefixHits, kPreemptions,
                           kSpecDrafts, kSpecDraftTokens, kSpecAccepted, kSpecAcceptedPerPos,
                           kTierBytes, kTierCapacity, kTierBlocks, kTierHits, kTierPromotions,
                           kTierDemotions, kTierEvictions, kTierRejected, kStepSeconds})
    registry_.clear(name);
  // The one model's gauges ("" in the map: a server that is not in router mode) are published
  // even before its first step, as always.
  const EngineGauges none;
  if (gauges_.empty()) set_snapshot(none, {});
  for (const auto& [model, g] : gauges_) set_snapshot(g, model);
  registry_.clear(kExpertTokens);
  const EngineGauges& g = gauges_.count("") ? gauges_.at("") : none;
  if (g.moe_experts > 0 &&
      g.expert_tokens.size() == static_cast<size_t>(g.moe_layers * g.moe_experts)) {
    for (int64_t l = 0; l < g.moe_layers; ++l)
      for (int64_t e = 0; e < g.moe_experts; ++e)
        registry_.set(kExpertTokens, {{"layer", std::to_string(l)}, {"expert", std::to_string(e)}},
                      static_cast<double>(g.expert_tokens[static_cast<size_t>(l * g.moe_experts + e)]));
  }
  for (const char* name : {kDistWorld, kDistHeartbeat, kDistSeconds, kDistBytes, kDistCalls,
                           kDistExpertTokens}) {
    registry_.clear(name);
  }
  if (!g.ranks.empty()) {
    registry_.set(kDistWorld, {}, static_cast<double>(g.ranks.size()));
    registry_.set(kDistHeartbeat, {}, g.heartbeat_seconds);
    for (const RankGauges& rank : g.ranks) {
      const std::string r = std::to_string(rank.rank);
      for (const RankGauges::Op& op : rank.ops) {
        registry_.set(kDistSeconds, {{"rank", r}, {"op", op.name}}, op.seconds);
        registry_.set(kDistBytes, {{"rank", r}, {"op", op.name}}, static_cast<double>(op.bytes));
        registry_.set(kDistCalls, {{"rank", r}, {"op", op.name}}, static_cast<double>(op.calls));
      }
      if (g.moe_experts > 0) {
        registry_.set(kDistExpertTokens, {{"rank", r}}, static_cast<double>(rank.expert_tokens));
      }
    }
  }
  std::string out;
  out.reserve(8192);
  registry_.render(out);
  wire::append_process_metrics(out);
  return out;
}

}  // namespace cadenza::server
