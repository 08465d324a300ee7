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
// StreamingDetokenizer (text deltas are whole UTF-8 characters, decoded as the continuation of the
// prompt: the first one keeps its leading space) and StopStringFilter (text that
// could start a stop string is held back until it cannot). Stops: end-of-generation tokens
// (unless ignore_eos), stop_token_ids, stop strings (cut from the text), max_tokens and the
// context limit (finish reason length). Before the Sampler, a LogitsProcessor applies logit bias,
// penalties and min_tokens, and reports logprobs when asked (logits_processor.h).
//
// Constrained decoding (SamplingParams::grammar): each stream owns a grammar::GrammarMatcher.
// Every token it samples (plain, a verified draft or a bonus token) is drawn from the processed
// logits masked by the matcher's next-token bitmask, then advances the matcher. The matcher's
// state depends only on the stream's own output tokens, which are never resampled, so a
// constrained request gives the same tokens alone or batched, preempted or not; samples of n > 1
// each start a matcher of their own. When the grammar admits nothing more after a token, the
// request ends there (finish reason stop) instead of spending a step on end-of-generation.
//
// n > 1 (SamplingParams::n): add_request returns one id; the request runs as n samples, each with
// its own outputs (RequestOutput::id = that id, RequestOutput::index = 0..n-1) and its own final
// output (finished). Sample i samples with seed + i. Sample 0 computes the prompt; in the step
// that computes its last prompt token, samples 1..n-1 are forked from it (sched::Scheduler::fork):
// they share its full KV blocks, get a copy of its partial last block, and sample their first
// token from the same logits, so the prompt is computed once whatever the prefix-cache setting.
// A sample that cannot be forked then (max_num_seqs running, or no free block for its copy) is
// queued instead and shares the prompt's full blocks through the prefix cache. The request is
// done when every index has returned its final output; abort(id) aborts them all. The
// bookkeeping of the samples is in parallel_samples.cpp.
//
// Speculative decoding (EngineConfig::speculative, speculative.h): requests get n-gram or
// draft-model drafts verified in the same forward pass, 1..k+1 tokens per step; greedy output is
// the output without, sampled output has its distribution (exact rejection sampling).
//
// Ownership: Model and Tokenizer are borrowed and must outlive the engine; the engine owns the KV
// memory (model::KvCache), the block manager, the scheduler and the requests.
// Thread-safety: none. One engine thread calls everything (a server hands requests to it through
// a queue); the Model must not run other forward passes meanwhile. Inside step() the draws of
// plain rows run on the model backend's thread pool (EngineConfig::parallel_sampling), which the
// forward pass has finished with by then.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/draft_length_policy.h"
#include "engine/kv_tiers.h"
#include "grammar/matcher.h"
#include "engine/logits_processor.h"
#include "engine/sampler.h"
#include "engine/speculative.h"
#include "engine/stop_strings.h"
#include "kv/kv_cache_manager.h"
#include "kv/memory_tier.h"
#include "kv/state_slots.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "request/request.h"
#include "sched/scheduler.h"
#include "spec/proposer.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace cadenza::engine {

// The request vocabulary lives in src/request (below src/sched and src/engine); these keep the
// engine::RequestId, engine::FinishReason and engine::to_string spellings of the engine's users.
using ::cadenza::FinishReason;
using ::cadenza::ImageInput;
using ::cadenza::Request;
using ::cadenza::RequestId;
using ::cadenza::RequestStatus;
using ::cadenza::to_string;
using Clock = std::chrono::steady_clock;
// A duration in seconds (for metrics and the step-cost fit).
inline double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct EngineConfig {
  // KV blocks in the pool (model::KvCache and kv::KvCacheManager alike). 0: room for
  // min(max_num_seqs, 8) sequences of max_model_len tokens. Must hold one max_model_len sequence.
  int32_t num_kv_blocks = 0;
  int32_t block_size = 16;
  bool enable_prefix_caching = true;
  int32_t max_num_batched_tokens = 2048;  // token budget per step (>= max_num_seqs)
  int32_t max_num_seqs = 64;              // running requests at most
  int32_t max_model_len = 0;  // prompt + output tokens at most; 0: min(context_length, 4096)
  DType kv_type = DType::F16;  // KV element type: F16, F32 or Q8_0 (model::KvCacheOptions)
  // Speculative decoding for greedy requests (speculative.h); method none by default.
  SpeculativeConfig speculative = {};
  // Sample the requests of a step in parallel on the model backend's thread pool
  // (kernels::Backend::host_pool; serially when it has none). Each request's sampler, processor
  // and random state are its own, so the tokens are those of sequential sampling, bit for bit;
  // false samples one request after another on the engine thread (tests compare the two).
  bool parallel_sampling = true;
  // Host-memory and disk tiers below the KV pool for evicted prefix-cache blocks (kv_tiers.h);
  // none by default. Off (logged) where prefix caching is off.
  KvTierConfig kv_tiers = {};
  // Sliding-window layers (gemma3, gpt-oss) keep only their window's KV: a window block group
  // (kv::KvCacheConfig::num_window_blocks) beside the main pool. Off, or with KV tiers or a model
  // split across processes (not supported there; logged), they keep full-context KV in the
  // main pool like every other layer. Outputs are the same either way.
  bool sliding_window_kv = true;
  // Blocks of the window group; 0: kv::kv_window_blocks (room for max_num_seqs sequences).
  int32_t num_window_kv_blocks = 0;
  // Hybrid models' prefix caching: host memory for recurrent-state snapshots (each sequence's
  // state at block boundaries of its prompt, kv::MemoryTier, LRU), keyed by the prefix's block
  // hash, so that a cached prefix resumes from its snapshot (src/kv/README.md). 0: prefix
  // caching is off for hybrid models. Not part of the KV memory (--kv-cache-memory).
  int64_t state_snapshot_bytes = int64_t{512} << 20;
  // Where snapshots are taken: at the end of every prompt chunk that ends on a block boundary;
  // prompt chunks are cut at the last block boundary before a prompt's last token (the longest
  // prefix a later request can reuse: a multi-turn conversation's previous prompt) and at every
  // multiple of this many tokens (a multiple of block_size; 0: only the former), so that a
  // shared system prompt followed by different messages reuses up to the last multiple before
  // they diverge. Smaller: more reuse, smaller prefill chunks and more snapshots.
  int32_t state_snapshot_interval = 512;
};

// The window the engine's window group would use for a model of shape `model` under `config`
// (the largest attention window of an attention layer), or 0 when the layers keep full-context
// KV (no windowed layer, sliding_window_kv off, KV tiers, a window as long as max_model_len;
// max_model_len 0 resolves as in EngineCore::create). The CLI's --kv-cache-memory sizing uses
// it to count the same layers as the engine.
int32_t kv_window_for(const model::ModelConfig& model, const EngineConfig& config);
// The same for a loaded model: 0 also when it is split across processes.
int32_t kv_window_for(const model::Model& model, const EngineConfig& config);

// What EngineCore::clear_prefix_cache dropped.
struct PrefixCacheCleared {
  int64_t pool_blocks = 0;   // cached pool blocks forgotten (their KV stays with running requests)
  int64_t memory_bytes = 0;  // freed in the host-memory tier
  int64_t disk_bytes = 0;    // deleted from the disk tier
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
  std::string stop_string;  // kStop by a stop string: that string (else empty)
  RequestMetrics metrics;  // filled when finished
  int32_t index = 0;       // which of the request's n samples (0 when n == 1)
  // One per new token when SamplingParams::logprobs >= 0 (see logits_processor.h); else empty.
  std::vector<TokenLogprob> logprobs;
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
  double kv_usage = 0;      // used blocks / all blocks (the fuller pool with a window group)
  // KV bytes the blocks of live requests take (free cached blocks not counted): main pool
  // blocks * KvCache::block_bytes() + window-group blocks * KvCache::window_block_bytes().
  int64_t kv_used_bytes = 0;
  // Hybrid models' recurrent-state snapshots (prefix caching): held, their bytes, and how many
  // were restored into a request's state slot on a prefix hit.
  int64_t state_snapshots = 0;
  int64_t state_snapshot_bytes = 0;
  int64_t state_snapshot_restores = 0;
  int64_t num_preemptions = 0;
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  int64_t prefix_cache_query_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;
  int64_t num_steps = 0;               // forward passes
  int64_t num_computed_tokens = 0;     // tokens run through the model (prompt chunks + decodes)
  int64_t num_generated_tokens = 0;
  int64_t num_finished = 0;
  // Speculative decoding, with vLLM's meaning: verification passes of a request that had drafts,
  // draft tokens computed, drafts accepted, and the tokens those passes emitted (accepted + 1
  // each, fewer when a stop cut it short). Acceptance rate = accepted / draft tokens.
  int64_t num_spec_drafts = 0;
  int64_t num_spec_draft_tokens = 0;
  int64_t num_spec_accepted_tokens = 0;
  int64_t num_spec_emitted_tokens = 0;
  // Per draft position i (0-based, up to spec::kMaxSpeculativeTokens): verifications that had a
  // draft there, and how many of those accepted it (vLLM's num_accepted_tokens_per_pos). The
  // acceptance rate at position i, accepted[i] / drafted[i], falls with i; the chance that a
  // verification reaches position i is accepted[i] / num_spec_drafts.
  std::array<int64_t, spec::kMaxSpeculativeTokens> spec_draft_tokens_per_position{};
  std::array<int64_t, spec::kMaxSpeculativeTokens> spec_accepted_per_position{};
  // Blocks the prefix cache brought back from a KV tier, and each tier's counters (kv_tiers.h),
  // fastest tier first; empty without tiers.
  int64_t prefix_cache_tier_hit_blocks = 0;
  struct KvTier {
    std::string name;  // "memory" or "disk"
    kv::KvTierStats stats;
  };
  std::vector<KvTier> kv_tiers;
  // Wall seconds of step() by phase (the engine's own profile of a step): `schedule` (drafts,
  // scheduling, building the batch), `forward` (Model::forward: matmuls, attention, the output
  // head), `sample` (after the forward: logits processing, sampling, detokenization, stops).
  // Time between steps (the caller's: queues, sinks) is in none of them.
  double step_schedule_s = 0;
  double step_forward_s = 0;
  double step_sample_s = 0;
  LatencySummary queue_time;   // over finished requests that were scheduled
  LatencySummary ttft;         // over requests that produced a token
  LatencySummary inter_token;  // over all consecutive token pairs
};

class EngineCore {
 public:
  // Errors: bad config values (speculative ones included: validate(SpeculativeConfig)), a KV pool too small for one max_model_len sequence, max_model_len
  // over the model's context, KV memory that cannot be allocated.
  static Result<std::unique_ptr<EngineCore>> create(model::Model& model, const Tokenizer& tokenizer,
                                                    const EngineConfig& config = {});
  // The same with a caller's proposer (tests, embedders): when config.speculative is enabled,
  // drafts come from `proposer` (owned by the engine from here on) instead of the method's own;
  // null means the method's own. Its drafts must be token ids of the model's vocabulary.
  static Result<std::unique_ptr<EngineCore>> create(model::Model& model, const Tokenizer& tokenizer,
                                                    const EngineConfig& config,
                                                    std::unique_ptr<spec::Proposer> proposer);
  ~EngineCore();
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  // Queues a request and returns its id (ids are never reused). Errors: the first rule of
  // validate_request (request/validate_request.h) that the request breaks, against the model's
  // vocabulary and max_model_len, as "request: <message>".
  // priority: lower values are scheduled first. cache_salt: requests share cached prefixes only
  // with requests of the same salt.
  // images (request/image_input.h): embeddings that replace the prompt's placeholder tokens at
  // their positions, in every step that computes them (prompt chunks may end inside an image;
  // a preempted request recomputes them from the same embeddings). Cached prefix blocks that
  // overlap an image match only the same image digest. Errors: images out of order,
  // overlapping, outside the prompt, or whose embeddings are not num_tokens x n_embd floats;
  // images on a model split across processes.
  Result<RequestId> add_request(std::vector<int32_t> prompt, const SamplingParams& params,
                                int32_t priority = 0, std::string cache_salt = {},
                                std::vector<ImageInput> images = {});

  // Aborts a live request (every live sample when n > 1): the next step() frees its blocks and
  // returns its final output(s) (finish reason abort). False when the id is unknown or already
  // finished.
  bool abort(RequestId id);

  // One iteration of the loop (see the header comment). Empty when there is nothing to do.
  std::vector<RequestOutput> step();

  // The model this engine runs (read-only views such as MoE routing statistics).
  const model::Model& model() const { return model_; }
  // For work that runs on the engine's thread between steps (server embeddings): the same
  // one-forward-at-a-time rule as the engine's own steps.
  model::Model& model() { return model_; }
  // A model split across processes (docs/distributed.md): whether it is, the first failure of a
  // rank or a transfer (sticky: every later step fails with it too), and a heartbeat that every
  // worker must answer within `timeout_s` (its error names the rank). Ok in one process.
  bool distributed() const { return model_.distributed() != nullptr; }
  Status health() const;
  Status check_workers(double timeout_s);
  bool has_work() const { return scheduler_->has_work(); }
  EngineStats stats() const;
  const EngineConfig& config() const { return config_; }
  const kv::KvCacheManager& kv_manager() const { return *kv_manager_; }
  // Bytes of the KV memory (model::KvCache::size_bytes: both block groups, recurrent states).
  size_t kv_cache_bytes() const;
  // Drops the prefix cache of `tier`: "pool" (the cached blocks of the KV pool), "memory",
  // "disk", or "all" (every one of them). A tier that is not configured frees nothing. Running
  // requests keep their blocks. Error: an unknown tier name.
  Result<PrefixCacheCleared> clear_prefix_cache(std::string_view tier);
  // The tiers below the pool (null without).
  const kv::KvTierStack* kv_tiers() const { return kv_tiers_.get(); }
  const sched::Scheduler& scheduler() const { return *scheduler_; }
  // The proposer that drafts (null without speculation), e.g. a spec::DraftModelProposer whose
  // KV pool a caller wants to look at.
  const spec::Proposer* proposer() const { return proposer_.get(); }

 private:
  // Per-request engine state beside the scheduler's Request.
  struct Stream {
    Stream(const SamplingParams& params, std::span<const int32_t> prompt,
           std::span<const int32_t> eog_ids, int32_t n_vocab, const Tokenizer& tokenizer,
           RequestId public_id, int32_t index);
    Sampler sampler;
    LogitsProcessor processor;
    std::optional<grammar::GrammarMatcher> matcher;  // set when params.grammar is
    StreamingDetokenizer detokenizer;
    StopStringFilter stops;
    RequestId public_id = 0;  // the id add_request returned (outputs carry it)
    int32_t index = 0;        // sample index within that request
    AcceptanceEstimate acceptance;  // its drafts' acceptance (adaptive speculation)
    bool scheduled = false;
    bool has_token = false;
    Clock::time_point last_token{};
    RequestMetrics metrics;
  };

  EngineCore(model::Model& model, const Tokenizer& tokenizer, const EngineConfig& config,
             std::unique_ptr<model::KvCache> kv_cache);
  // Appends the sampled token, applies stops; fills `out`. True when the request ended.
  bool process_token(Request& r, Stream& s, int32_t token, RequestOutput& out);
  // The end of request `id`: takes it from the scheduler (or `ended`, a request the scheduler
  // already handed back, as an applied abort is), completes `out` (finished, reason, metrics),
  // forgets its stream and counts it.
  void finish(RequestId id, FinishReason reason, RequestOutput& out,
              std::unique_ptr<Request> ended = nullptr);
  // The request's first step: its queue time ends at `now`.
  void mark_scheduled(const Request& r, Stream& s, Clock::time_point now);
  // An output for internal request `id`, with its public id and index.
  RequestOutput new_output(RequestId id) const;
  // Forgets the stream of internal id `id` (and its group entry); moves its metrics to `out`.
  void drop_stream(RequestId id, RequestOutput& out);
  // n > 1 (parallel_samples.cpp). Records sample `index` of `public_id`: sample 0 is scheduled,
  // the others wait for its prompt.
  void join_group(RequestId public_id, int32_t index, std::unique_ptr<Request> r);
  // Forgets internal id `id` in its group (no-op for n == 1).
  void leave_group(RequestId public_id, RequestId id);
  // Samples 1..n-1 of `parent` not yet started: forks them from the parent (returned: they sample
  // from the parent's logits this step) or queues those that cannot be forked (release), or ends
  // them (drop, one final output each into `outputs`).
  std::vector<Request*> release_pending(RequestId parent, std::vector<RequestOutput>& outputs);
  // Samples the next token of `r` from its raw logits, applies stops, appends its output.
  // `shared_row`: other samples read the same row after this one (n > 1 forks).
  // Appends the image rows of `r`'s positions [start, start + count), which the batch holds from
  // row `first_row` on, to embd_rows_ / embd_values_; and the bidirectional images among them
  // (ImageInput::bidirectional) as attention spans of batch sequence `seq`.
  void add_image_rows(const Request& r, int32_t start, int32_t count, int32_t first_row, int32_t seq);
  void sample_next(Request& r, std::span<float> logits, bool shared_row,
                   std::vector<RequestOutput>& outputs);
  // The per-token path of sample_next without the finish: processes the row (when the request
  // has processing parameters or a grammar: in place, or a copy when `shared_row`), samples,
  // records logprobs, appends the token and applies stops into `out`. Returns whether the request ended (out.finish_reason kNone then means stop).
  // With a `draft` (>= 0) the token comes from Sampler::verify instead of sample(), and
  // `*accepted` (non-null then) says whether it is the draft.
  bool sample_token(Request& r, Stream& s, std::span<float> row, bool shared_row,
                    RequestOutput& out, int32_t draft = -1, bool* accepted = nullptr);
  // The halves of sample_token. draw_token: processes the row, draws (or verifies `draft`) and
  // records the logprobs into `out`; returns the token, or -1 when the grammar left nothing to
  // sample (the request ends: `out` is completed). It touches only the stream, the row, `out`
  // and, for a shared row or a grammar, the engine's scratch (processed_, grammar_mask_), so
  // draws of different requests without those may run on different threads at once.
  // emit_token: records the token in the stream and the request, applies stops; returns whether
  // the request ended. Engine thread only.
  int32_t draw_token(Request& r, Stream& s, std::span<float> row, bool shared_row,
                     RequestOutput& out, int32_t draft, bool* accepted,
                     std::vector<int32_t>& logprob_scratch);
  bool emit_token(Request& r, Stream& s, int32_t token, RequestOutput& out);
  // step(): draws the tokens of the plain entries of `plan` (one row each, no drafts, no grammar,
  // no samples waiting to fork) in parallel on the backend's pool; the others are left to the
  // serial loop (token -1). `rows`: each entry's first logit row.
  void draw_in_parallel(const sched::SchedulePlan& plan, const std::vector<size_t>& rows);
  void finish_ended(Request& r, RequestOutput& out);
  // Speculative decoding (speculative.cpp). Before schedule(): appends drafts to every eligible
  // running request in its decode phase (Request::num_draft_tokens).
  void propose_drafts();
  // SpeculativeConfig::adaptive: cuts draft_queries_ (and drafting_) to this step's planned k per
  // request, dropping those planned at 0 (draft_length_policy.h).
  void plan_adaptive_k();
  bool speculates(const Request& r) const;
  // After commit(), for an entry with drafts: `rows` holds the logits of its 1 + k last
  // positions. Emits the accepted drafts and the next token through sample_token, then rolls the
  // rejected positions back (Scheduler::rollback) and performs the KV copy it asks for.
  void verify_drafts(Request& r, const sched::ScheduledRequest& e, std::span<float> rows,
                     std::vector<RequestOutput>& outputs);
  void drop_pending(RequestId parent, FinishReason reason, const std::string& error,
                    std::vector<RequestOutput>& outputs);

  model::Model& model_;
  const Tokenizer& tokenizer_;
  EngineConfig config_;
  int32_t n_vocab_ = 0;
  // Performs a KV copy the manager asked for (fork, trim): main group, then window group.
  Status copy_kv(const kv::BlockCopy& copy);
  std::unique_ptr<model::KvCache> kv_cache_;
  // Declared before kv_manager_, which borrows it (destroyed after it). On destruction the pool's
  // cached blocks and the memory tier go to the disk tier, for the next run.
  std::unique_ptr<kv::KvTierStack> kv_tiers_;
  std::unique_ptr<kv::KvCacheManager> kv_manager_;
  // Hybrid models (ModelConfig::hybrid): each running request's recurrent-state slot in
  // kv_cache_ (max_num_seqs of them); null for other models.
  std::unique_ptr<kv::StateSlots> state_slots_;
  // Hybrid models with prefix caching: recurrent-state snapshots by block hash (opaque
  // KvCache::read_state bytes), and one slot's bytes in transit. Null otherwise.
  std::unique_ptr<kv::MemoryTier> state_snapshots_;
  std::vector<uint8_t> state_bytes_;
  // Restores the snapshot of the prefix a newly admitted request of a hybrid model found
  // (positions [0, start)) into its fresh state slot; snapshots the states of this step's
  // prompt chunks that ended on a block boundary.
  Status restore_state(const Request& r, int32_t start, int32_t slot);
  void snapshot_states(const sched::SchedulePlan& plan);
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::unordered_map<RequestId, std::unique_ptr<Stream>> streams_;  // by internal id
  // n > 1: public id -> internal ids of its live samples; parent internal id -> samples waiting
  // for the parent's prompt.
  std::unordered_map<RequestId, std::vector<RequestId>> groups_;
  std::unordered_map<RequestId, std::vector<std::unique_ptr<Request>>> pending_;
  std::vector<int32_t> eog_ids_;  // end-of-generation ids (min_tokens suppresses them)
  RequestId next_id_ = 1;
  std::unique_ptr<spec::Proposer> proposer_;  // null: no speculation
  std::vector<spec::DraftQuery> draft_queries_;
  std::vector<std::vector<int32_t>> drafts_;
  std::vector<Request*> drafting_;  // the requests of draft_queries_
  std::vector<int32_t> draft_;      // one entry's drafts while it is verified
  // Adaptive speculation (draft_length_policy.h): the fit of decode step times, the engine-wide
  // acceptance (the prior of a new request's), and propose_drafts' scratch.
  StepCostModel step_cost_;
  AcceptanceEstimate acceptance_;
  double draft_s_per_token_ = 0;  // the proposer's time per draft token (moving average)
  bool draft_cost_seen_ = false;
  int64_t explored_at_ = 0;         // the step of the last exploration (plan_adaptive_k)
  int64_t explore_interval_ = 64;   // steps between explorations
  bool planned_drafts_since_explore_ = false;
  std::vector<double> draft_rates_;
  std::vector<int32_t> draft_max_k_, draft_k_;
  EngineStats totals_;  // the cumulative counters; stats() adds the live ones

  // Batch buffers, reused from step to step.
  std::vector<int32_t> tokens_, positions_, seq_index_, logit_rows_, batch_state_slots_;
  // Image rows of the step's batch (model::Batch::embd_rows / embd_values).
  std::vector<int32_t> embd_rows_;
  std::vector<model::AttentionSpan> attention_spans_;  // bidirectional images of the step
  std::vector<float> embd_values_;
  std::vector<std::span<const int32_t>> tables_, window_tables_;
  std::vector<float> logits_;
  std::vector<float> processed_;    // one request's processed logits
  std::vector<int32_t> scratch_;   // compute_logprobs
  std::vector<uint32_t> grammar_mask_;  // one constrained request's next-token bitmask
  // draw_in_parallel's results per plan entry: the token (-1: not drawn there) and the output
  // holding its logprobs.
  std::vector<int32_t> drawn_;
  std::vector<RequestOutput> drawn_out_;
};

}  // namespace cadenza::engine
