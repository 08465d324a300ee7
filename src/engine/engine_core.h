// EngineCore: the serving loop of one model. Requests come in with add_request(); each step()
// schedules (sched::Scheduler over kv::KvCacheManager), runs one forward pass over a ragged batch
// of every scheduled request (model::Model), samples the next token of each request whose
// computed tokens reached its end, applies stops, and returns what each request produced.
//
//   auto engine = EngineCore::create(model, tokenizer, {.num_kv_blocks = 512});
//   auto id = (*engine)->add_request(prompt_ids, params);     // Result: validation errors
//   while ((*engine)->has_work())
//     for (RequestOutput& out : (*engine)->step()) stream(out);  // token ids + text deltas
//
// Per request: its own Sampler (seeded from SamplingParams::seed, advanced once per generated
// token, so the same seed gives the same tokens alone or batched, preempted or not), its own
// StreamingDetokenizer (text deltas are whole UTF-8 characters) and StopStringFilter (text that
// could start a stop string is held back until it cannot). Stops: end-of-generation tokens
// (unless ignore_eos), stop_token_ids, stop strings (cut from the text), max_tokens and the
// context limit (finish reason length).
//
// Ownership: Model and Tokenizer are borrowed and must outlive the engine; the engine owns the KV
// memory (model::KvCache), the block manager, the scheduler and the requests.
// Thread-safety: none. One engine thread calls everything (a server hands requests to it through
// a queue); the Model must not run other forward passes meanwhile.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/stop_strings.h"
#include "kv/kv_cache_manager.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "sched/scheduler.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace cadenza::engine {

struct EngineConfig {
  // KV blocks in the pool (model::KvCache and kv::KvCacheManager alike). 0: room for
  // min(max_num_seqs, 8) sequences of max_model_len tokens. Must hold one max_model_len sequence.
  int32_t num_kv_blocks = 0;
  int32_t block_size = 16;
  bool enable_prefix_caching = true;
  int32_t max_num_batched_tokens = 2048;  // token budget per step (>= max_num_seqs)
  int32_t max_num_seqs = 64;              // running requests at most
  int32_t max_model_len = 0;  // prompt + output tokens at most; 0: min(context_length, 4096)
  DType kv_type = DType::F32;
};

struct RequestMetrics {
  double queue_time_s = 0;  // arrival -> first scheduled
  double ttft_s = 0;        // arrival -> first generated token
  std::vector<double> inter_token_s;  // between consecutive generated tokens
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  int32_t num_cached_prompt_tokens = 0;  // prefix-cache hit at first admission
  int32_t num_preemptions = 0;
};

// What one request produced in one step. Requests that computed only a prompt chunk produce none.
struct RequestOutput {
  RequestId id = 0;
  std::vector<int32_t> new_token_ids;  // usually one; empty for an abort
  std::string text;                    // new text (stop strings and held-back text excluded)
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;       // the reason when finish_reason == kError
  RequestMetrics metrics;  // filled when finished
};

struct LatencySummary {
  int64_t count = 0;
  double sum_s = 0;
  double max_s = 0;
  double mean_s() const { return count ? sum_s / static_cast<double>(count) : 0; }
  void add(double s) {
    ++count;
    sum_s += s;
    if (s > max_s) max_s = s;
  }
};

struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;  // waiting and preempted
  double kv_usage = 0;      // used blocks / all blocks
  int64_t num_preemptions = 0;
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  int64_t prefix_cache_query_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;
  int64_t num_steps = 0;               // forward passes
  int64_t num_computed_tokens = 0;     // tokens run through the model (prompt chunks + decodes)
  int64_t num_generated_tokens = 0;
  int64_t num_finished = 0;
  LatencySummary queue_time;   // over finished requests that were scheduled
  LatencySummary ttft;         // over requests that produced a token
  LatencySummary inter_token;  // over all consecutive token pairs
};

class EngineCore {
 public:
  // Errors: bad config values, a KV pool too small for one max_model_len sequence, max_model_len
  // over the model's context, KV memory that cannot be allocated.
  static Result<std::unique_ptr<EngineCore>> create(model::Model& model, const Tokenizer& tokenizer,
                                                    const EngineConfig& config = {});
  ~EngineCore();
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  // Queues a request and returns its id (ids are never reused). Errors: empty prompt, token ids
  // outside the vocabulary, prompt + max_tokens over max_model_len, bad sampling parameters
  // (temperature < 0 or not finite, top_p outside (0, 1], min_p outside [0, 1], max_tokens < 1,
  // empty stop strings, stop token ids outside the vocabulary).
  // priority: lower values are scheduled first. cache_salt: requests share cached prefixes only
  // with requests of the same salt.
  Result<RequestId> add_request(std::vector<int32_t> prompt, const SamplingParams& params,
                                int32_t priority = 0, std::string cache_salt = {});

  // Aborts a live request: the next step() frees its blocks and returns its final output
  // (finish reason abort). False when the id is unknown or already finished.
  bool abort(RequestId id);

  // One iteration of the loop (see the header comment). Empty when there is nothing to do.
  std::vector<RequestOutput> step();

  bool has_work() const { return scheduler_->has_work(); }
  EngineStats stats() const;
  const EngineConfig& config() const { return config_; }
  const kv::KvCacheManager& kv_manager() const { return *kv_manager_; }
  const sched::Scheduler& scheduler() const { return *scheduler_; }

 private:
  // Per-request engine state beside the scheduler's Request.
  struct Stream {
    Sampler sampler;
    StreamingDetokenizer detokenizer;
    StopStringFilter stops;
    bool scheduled = false;
    bool has_token = false;
    Clock::time_point last_token{};
    RequestMetrics metrics;
  };

  EngineCore(model::Model& model, const Tokenizer& tokenizer, const EngineConfig& config,
             std::unique_ptr<model::KvCache> kv_cache);
  Status validate(std::span<const int32_t> prompt, const SamplingParams& params) const;
  // Appends the sampled token, applies stops; fills `out`. True when the request ended.
  bool process_token(Request& r, Stream& s, int32_t token, RequestOutput& out);
  // Finishes `id` in the scheduler, completes `out`'s metrics and forgets its stream.
  void finish(RequestId id, FinishReason reason, RequestOutput& out);

  model::Model& model_;
  const Tokenizer& tokenizer_;
  EngineConfig config_;
  int32_t n_vocab_ = 0;
  std::unique_ptr<model::KvCache> kv_cache_;
  std::unique_ptr<kv::KvCacheManager> kv_manager_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::unordered_map<RequestId, std::unique_ptr<Stream>> streams_;
  RequestId next_id_ = 1;
  EngineStats totals_;  // the cumulative counters; stats() adds the live ones

  // Batch buffers, reused from step to step.
  std::vector<int32_t> tokens_, positions_, seq_index_, logit_rows_;
  std::vector<std::span<const int32_t>> tables_;
  std::vector<float> logits_;
};

}  // namespace cadenza::engine
