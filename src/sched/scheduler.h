// Scheduler: continuous batching over the requests of one engine. Each step it decides which
// requests compute how many tokens, within a token budget and a cap on running sequences, and
// gets their KV blocks from the KvCacheManager (preempting when blocks run out).
//
// One engine step:
//   SchedulePlan plan = sched.schedule();      // applies pending aborts, allocates blocks
//   ... run plan.scheduled through the model (block tables from the plan) ...
//   sched.commit(plan);                        // advances num_computed_tokens, registers blocks
//   ... append sampled tokens to the requests whose entry has `sample` set ...
//   sched.finish(id, reason);                  // for each request that ended
//
// Policies (details and the no-starvation argument in README.md):
//   - order: priority class (lower value first), then arrival (FCFS); a preempted request keeps
//     its arrival, so it goes back to the front of its class;
//   - running requests first: one token for every decoding request, then prompt chunks for
//     running requests still in their prompt, then new admissions from the waiting queue;
//   - chunked prefill: a chunk is bounded by the budget left, so a long prompt never stalls decodes;
//   - speculative drafts (Request::num_draft_tokens) ride on a decode token with the budget and
//     free blocks left after prompt chunks, never preempting; the rest are dropped;
//   - admission looks up the prefix cache and starts num_computed_tokens after the cached part;
//     it is strictly in order: the first waiting request that does not fit stops admission;
//   - a running request that needs a block when none is free preempts the least important running
//     request (lowest priority class, latest arrival), possibly itself: its blocks are freed, its
//     computed count reset to 0, and it recomputes later. No admissions in a step that preempted.
//
// Ownership: owns the live requests; a Request* stays valid until finish() or an abort is applied
// by schedule(). Uses the KvCacheManager, which must outlive it and must not be mutated by others
// for scheduled requests. Thread-safety: none; the engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "request/request.h"
#include "kv/kv_cache_manager.h"
#include "util/result.h"

namespace cadenza::sched {

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 2048;  // token budget per step, >= max_num_seqs
  int32_t max_num_seqs = 64;              // running requests at most, >= 1
  // Hybrid models' prefix caching (recurrent-state snapshots are taken at the end of a step):
  // a chunk that would run past the last block boundary before a request's last token,
  // ((num_tokens - 1) / block_size) * block_size, stops there, so that the state at the longest
  // prefix find_cached_prefix can ever return gets snapshotted. The rest runs next step.
  bool cut_chunks_at_last_block = false;
  // > 0 (a multiple of the block size): prompt chunks also stop at every multiple of this many
  // tokens, so that snapshots exist at those prefixes too (a shared system prompt followed by
  // different messages reuses the last multiple before they diverge). 0: no such cut.
  int32_t snapshot_interval = 0;
};

// Checks the config's own bounds.
Status validate(const SchedulerConfig& config);

// One request's share of a step: compute tokens [start, start + num_tokens) of request->tokens.
struct ScheduledRequest {
  Request* request = nullptr;
  int32_t start = 0;       // == request->num_computed_tokens at schedule()
  int32_t num_tokens = 0;  // >= 1
  // The last scheduled token is the sequence's last token: its logits give the next token.
  bool sample = false;
  // Speculative decoding: the last num_draft_tokens scheduled tokens are the request's drafts
  // (Request::num_draft_tokens, already cut to this count); the logits of every position from
  // the last real token on are needed to verify them. 0: an ordinary entry.
  int32_t num_draft_tokens = 0;
  // The request's whole block table; valid until the next schedule() or finish().
  std::span<const int32_t> block_table;
  // Its window-group table (kv::KvCacheManager::window_block_table; empty without one).
  std::span<const int32_t> window_block_table;
};

struct SchedulePlan {
  std::vector<ScheduledRequest> scheduled;  // in scheduling order
  int32_t num_batched_tokens = 0;           // sum of num_tokens, <= max_num_batched_tokens
  std::vector<RequestId> preempted;         // preempted during this schedule()
  // Requests whose abort was applied: blocks freed, status kFinished / kAbort. Owned by the caller.
  std::vector<std::unique_ptr<Request>> aborted;
  bool empty() const { return scheduled.empty(); }
};

struct SchedulerStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;  // waiting and preempted
  int64_t num_preemptions = 0;
  int64_t num_steps = 0;    // schedule() calls that scheduled something
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, kv::KvCacheManager& kv);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request (status kWaiting). Preconditions (the engine validates): unique id, at least
  // one token, num_prompt_tokens == tokens.size(), num_computed_tokens == 0, and the request fits
  // the KV pool on its own. Sets arrival_seq.
  Request& add(std::unique_ptr<Request> request);

  // n > 1 sampling: starts `child` as a running copy of running request `parent` at its current
  // state (same tokens and num_computed_tokens; kv::KvCacheManager::fork shares the full blocks).
  // Returns the KV copy the engine must perform before the child's next step, or nullopt (and
  // `child` is left untouched in the caller's hands) when the parent is not running, the running
  // set is at max_num_seqs, or the pool lacks the child's fresh blocks: the caller then add()s it.
  // Preconditions: unique child id, parent has no uncommitted plan.
  std::optional<kv::BlockCopy> fork(std::unique_ptr<Request>& child, RequestId parent);

  // Marks a live request for abort; schedule() applies it (frees its blocks, returns it in
  // plan.aborted). False when the id is unknown or already finished.
  bool abort(RequestId id);

  // Builds the next step's plan. See the header comment for the policies.
  SchedulePlan schedule();

  // The plan ran: every scheduled request has computed its tokens. Advances num_computed_tokens
  // and registers newly full blocks with the prefix cache. Call before appending sampled tokens
  // or finishing requests of this plan.
  void commit(const SchedulePlan& plan);

  // Speculative decoding, after commit(): running request `id` keeps the KV of its first
  // `num_computed_tokens` positions only (its last real token and the accepted drafts; the
  // engine has already replaced the drafts in `tokens` by the verified tokens). Rolls the blocks
  // back with KvCacheManager::trim and returns the KV copy the engine must perform before the
  // request's next step (num_tokens 0: none). When the pool lacks the block such a copy needs
  // (only possible if the cut block were shared, which a block holding this step's drafts never
  // is), the request is preempted instead (recompute: always correct) and the copy is empty.
  // Preconditions: num_draft_tokens == 0, num_computed_tokens <= the committed count and
  // < num_tokens().
  kv::BlockCopy rollback(RequestId id, int32_t num_computed_tokens);

  // Ends a live request: frees its blocks, removes it from the queues, status kFinished with
  // `reason`, and hands it back. Null when the id is unknown.
  std::unique_ptr<Request> finish(RequestId id, FinishReason reason);

  Request* find(RequestId id);
  bool has_work() const { return !requests_.empty(); }
  std::span<Request* const> running() const { return running_; }
  std::span<Request* const> waiting() const { return waiting_; }
  SchedulerStats stats() const;
  const SchedulerConfig& config() const { return config_; }
  kv::KvCacheManager& kv() const { return kv_; }

 private:
  struct StepState;
  // Schedules `n` tokens of running request `r`, preempting the least important running
  // requests while blocks are missing. False when `r` itself was preempted.
  bool schedule_running(Request* r, int32_t n, StepState& step);
  // `step` null: outside schedule() (rollback).
  void preempt(Request* victim, StepState* step);
  // Speculative decoding: extends the decode entries scheduled this step by as many of their
  // drafts as the budget and the free blocks allow (never preempting for a draft), and drops the
  // drafts that did not fit.
  void schedule_drafts(StepState& step);
  void insert_waiting(Request* r);
  void insert_running(Request* r);
  void remove_from(std::vector<Request*>& queue, Request* r);
  // Tokens `r` (allocated) can still grow by without new blocks beyond the free ones.
  int32_t room_for(const Request* r) const;
  // A prompt chunk of `n` tokens from `start`, cut per cut_chunks_at_last_block and
  // snapshot_interval, and never ending inside a bidirectional image (ImageInput::bidirectional,
  // whose tokens must be computed in one step): 0 when the image's rest does not fit `n`.
  int32_t cut_chunk(const Request* r, int32_t start, int32_t n) const;
  // [start, start + n) shortened to end before the bidirectional image it would end inside (0:
  // it starts inside that image or at its first token).
  static int32_t keep_spans_whole(const Request* r, int32_t start, int32_t n);

  SchedulerConfig config_;
  kv::KvCacheManager& kv_;
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
  std::vector<Request*> running_;  // sorted: priority, then arrival_seq
  std::vector<Request*> waiting_;  // sorted: priority, then arrival_seq
  std::unordered_set<RequestId> pending_aborts_;
  uint64_t next_arrival_seq_ = 0;
  int64_t num_preemptions_ = 0;
  int64_t num_steps_ = 0;
};

}  // namespace cadenza::sched
