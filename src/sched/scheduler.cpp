#include "sched/scheduler.h"

#include <algorithm>
#include <cassert>
#include <type_traits>

namespace cadenza::sched {

// Requests' ids go to the KV block manager as they are.
static_assert(std::is_same_v<RequestId, kv::RequestId>);

namespace {

// Scheduling order: priority class first (lower value first), then arrival.
bool before(const Request* a, const Request* b) {
  if (a->priority != b->priority) return a->priority < b->priority;
  return a->arrival_seq < b->arrival_seq;
}

// The request's images as the prefix cache's content spans (empty for a text-only request).
std::vector<kv::ContentSpan> content_spans(const Request& r) {
  std::vector<kv::ContentSpan> spans;
  spans.reserve(r.images.size());
  for (const ImageInput& im : r.images)
    spans.push_back({im.position, im.position + im.num_tokens, kv::BlockHash{im.digest}});
  return spans;
}

}  // namespace

Status validate(const SchedulerConfig& config) {
  if (config.max_num_seqs < 1)
    return make_error("scheduler: max_num_seqs must be >= 1 (got {})", config.max_num_seqs);
  if (config.max_num_batched_tokens < config.max_num_seqs)
    return make_error(
        "scheduler: max_num_batched_tokens ({}) must be >= max_num_seqs ({}) so that every "
        "running request gets its decode token each step",
        config.max_num_batched_tokens, config.max_num_seqs);
  return {};
}

struct Scheduler::StepState {
  SchedulePlan& plan;
  int32_t budget = 0;
  bool preempted_any = false;
  std::unordered_map<RequestId, size_t> index;  // request id -> plan.scheduled entry
};

Scheduler::Scheduler(const SchedulerConfig& config, kv::KvCacheManager& kv)
    : config_(config), kv_(kv) {
  assert(validate(config).ok());
}

Scheduler::~Scheduler() = default;

Request& Scheduler::add(std::unique_ptr<Request> request) {
  assert(request && !request->tokens.empty());
  assert(request->num_computed_tokens == 0);
  assert(requests_.count(request->id) == 0 && "duplicate request id");
  Request* r = request.get();
  r->arrival_seq = next_arrival_seq_++;
  r->status = RequestStatus::kWaiting;
  r->finish_reason = FinishReason::kNone;
  requests_.emplace(r->id, std::move(request));
  insert_waiting(r);
  return *r;
}

std::optional<kv::BlockCopy> Scheduler::fork(std::unique_ptr<Request>& child, RequestId parent) {
  assert(child && requests_.count(child->id) == 0 && "duplicate request id");
  Request* p = find(parent);
  if (p == nullptr || p->status != RequestStatus::kRunning ||
      static_cast<int32_t>(running_.size()) >= config_.max_num_seqs) {
    return std::nullopt;
  }
  kv::ForkResult f = kv_.fork(parent, child->id);
  if (!f) return std::nullopt;
  Request* r = child.get();
  r->tokens = p->tokens;
  r->num_computed_tokens = p->num_computed_tokens;
  r->num_cached_prompt_tokens = std::min(p->num_computed_tokens, r->num_prompt_tokens);
  r->arrival_seq = next_arrival_seq_++;
  r->status = RequestStatus::kRunning;
  r->finish_reason = FinishReason::kNone;
  requests_.emplace(r->id, std::move(child));
  insert_running(r);
  return f.copy;
}

bool Scheduler::abort(RequestId id) {
  if (requests_.count(id) == 0) return false;
  return pending_aborts_.insert(id).second;
}

Request* Scheduler::find(RequestId id) {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

void Scheduler::insert_waiting(Request* r) {
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), r, before), r);
}

void Scheduler::insert_running(Request* r) {
  running_.insert(std::upper_bound(running_.begin(), running_.end(), r, before), r);
}

void Scheduler::remove_from(std::vector<Request*>& queue, Request* r) {
  auto it = std::find(queue.begin(), queue.end(), r);
  if (it != queue.end()) queue.erase(it);
}

std::unique_ptr<Request> Scheduler::finish(RequestId id, FinishReason reason) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return nullptr;
  std::unique_ptr<Request> r = std::move(it->second);
  requests_.erase(it);
  pending_aborts_.erase(id);
  remove_from(running_, r.get());
  remove_from(waiting_, r.get());
  kv_.free(id);
  r->drop_drafts();
  r->status = RequestStatus::kFinished;
  r->finish_reason = reason;
  return r;
}

int32_t Scheduler::room_for(const Request* r) const {
  const int64_t room = static_cast<int64_t>(kv_.max_allocatable_tokens(r->id)) - r->num_computed_tokens;
  return static_cast<int32_t>(std::clamp<int64_t>(room, 0, INT32_MAX));
}

int32_t Scheduler::cut_chunk(const Request* r, int32_t start, int32_t n) const {
  int32_t m = n;
  if (config_.snapshot_interval > 0) {
    const int32_t next = (start / config_.snapshot_interval + 1) * config_.snapshot_interval;
    if (start + m > next) m = next - start;
  }
  if (config_.cut_chunks_at_last_block) {
    const int32_t bs = kv_.block_size();
    const int32_t last = (r->num_tokens() - 1) / bs * bs;
    if (start < last && start + m > last) m = last - start;
  }
  if (r->images.empty()) return m;
  // A bidirectional image wins over the snapshot cuts: a cut inside it would recur every step.
  const int32_t whole = keep_spans_whole(r, start, m);
  return whole >= 1 ? whole : keep_spans_whole(r, start, n);
}

int32_t Scheduler::keep_spans_whole(const Request* r, int32_t start, int32_t n) {
  const int32_t end = start + n;
  for (const ImageInput& im : r->images) {
    if (!im.bidirectional) continue;
    if (end > im.position && end < im.position + im.num_tokens) return std::max(0, im.position - start);
  }
  return n;
}

void Scheduler::preempt(Request* victim, StepState* step) {
  if (step != nullptr) {
    if (auto it = step->index.find(victim->id); it != step->index.end()) {
      ScheduledRequest& e = step->plan.scheduled[it->second];
      step->budget += e.num_tokens;
      e.num_tokens = 0;  // dropped from the plan when it is compacted
      step->index.erase(it);
    }
  }
  kv_.free(victim->id);
  victim->drop_drafts();  // recomputed from its real tokens; the engine drafts again later
  victim->num_computed_tokens = 0;
  victim->status = RequestStatus::kPreempted;
  ++victim->num_preemptions;
  ++num_preemptions_;
  remove_from(running_, victim);
  insert_waiting(victim);
  if (step != nullptr) {
    step->plan.preempted.push_back(victim->id);
    step->preempted_any = true;
  }
}

void Scheduler::schedule_drafts(StepState& step) {
  for (Request* r : running_) {
    if (r->num_draft_tokens == 0) continue;
    auto it = step.index.find(r->id);
    int32_t k = 0;
    if (it != step.index.end() && step.budget > 0) {
      // Its decode token is allocated (step 1); room_for counts from num_computed_tokens, so
      // positions up to num_computed + room fit without taking anyone's blocks.
      k = std::min({r->num_draft_tokens, step.budget, room_for(r) - 1});
      if (k > 0) {
        ScheduledRequest& e = step.plan.scheduled[it->second];
        assert(e.num_tokens == 1 && e.start == r->num_computed_tokens);
        kv::Allocation a = kv_.allocate(r->id, e.start + 1 + k);
        assert(a && "room_for promised the blocks");
        (void)a;
        e.num_tokens += k;
        e.num_draft_tokens = k;
        step.budget -= k;
      }
    }
    // The drafts that did not fit are dropped: the entry computes exactly tokens [start, end).
    const int32_t drop = r->num_draft_tokens - std::max(k, 0);
    r->tokens.resize(r->tokens.size() - static_cast<size_t>(drop));
    r->num_draft_tokens = std::max(k, 0);
  }
}

kv::BlockCopy Scheduler::rollback(RequestId id, int32_t num_computed_tokens) {
  Request* r = find(id);
  assert(r != nullptr && r->status == RequestStatus::kRunning && r->num_draft_tokens == 0);
  assert(num_computed_tokens <= r->num_computed_tokens && num_computed_tokens < r->num_tokens());
  Result<kv::TrimResult> t = kv_.trim(id, num_computed_tokens);
  assert(t.ok() && "trim's preconditions hold for a running, committed request");
  if (!t.ok() || !*t) {
    // No free block for the copy of a shared cut block: recompute instead of writing into it.
    preempt(r, nullptr);
    return {};
  }
  r->num_computed_tokens = num_computed_tokens;
  return t->copy;
}

bool Scheduler::schedule_running(Request* r, int32_t n, StepState& step) {
  assert(n >= 1);
  for (;;) {
    kv::Allocation a = kv_.allocate(r->id, r->num_computed_tokens + n);
    if (a) {
      step.index[r->id] = step.plan.scheduled.size();
      step.plan.scheduled.push_back({r, r->num_computed_tokens, n, false, 0, {}, {}});
      step.budget -= n;
      return true;
    }
    // A running request holds its blocks, so the only failure is kNoRoom: free the least
    // important running request's blocks and retry (the victim may be `r` itself).
    assert(a.status == kv::AllocStatus::kNoRoom);
    assert(!running_.empty());
    Request* victim = running_.back();
    preempt(victim, &step);
    if (victim == r) return false;
  }
}

SchedulePlan Scheduler::schedule() {
  SchedulePlan plan;

  // Aborts first: their blocks are available to this step.
  for (RequestId id : pending_aborts_) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    std::unique_ptr<Request> r = std::move(it->second);
    requests_.erase(it);
    remove_from(running_, r.get());
    remove_from(waiting_, r.get());
    kv_.free(id);
    r->drop_drafts();
    r->status = RequestStatus::kFinished;
    r->finish_reason = FinishReason::kAbort;
    plan.aborted.push_back(std::move(r));
  }
  pending_aborts_.clear();

  StepState step{plan, config_.max_num_batched_tokens, false, {}};

  // 1. One token for every decoding running request, most important first. The budget always
  //    suffices (max_num_batched_tokens >= max_num_seqs >= running).
  const std::vector<Request*> snapshot = running_;
  for (Request* r : snapshot) {
    if (r->status != RequestStatus::kRunning) continue;  // preempted by an earlier one
    // Drafts ride on a decode token (schedule_drafts); they are not a prompt chunk.
    const int32_t want = r->num_tokens() - r->num_draft_tokens - r->num_computed_tokens;
    assert(want >= 1);
    assert(r->num_draft_tokens == 0 || want == 1);
    if (want != 1 || step.budget < 1) continue;
    schedule_running(r, 1, step);
  }

  // 2. The next prompt chunk of running requests still in their prompt, bounded by the budget
  //    left and, to avoid preempting for a mere chunk, by the free blocks (preempting only when
  //    not even one token fits).
  for (Request* r : snapshot) {
    if (step.budget < 1) break;
    if (r->status != RequestStatus::kRunning || step.index.count(r->id)) continue;
    const int32_t want = r->num_tokens() - r->num_computed_tokens;
    if (want <= 1) continue;
    int32_t n = cut_chunk(r, r->num_computed_tokens, std::min(want, step.budget));
    if (n < 1) {
      // The rest of a bidirectional image does not fit the budget left: nobody else's prompt
      // work takes it this step (no later chunks, drafts or admissions), so the next step has
      // room (add_request bounds an image's tokens by what a step leaves beside the decodes).
      step.budget = 0;
      break;
    }
    const int32_t room = room_for(r);
    // Short of blocks, the chunk takes what fits, unless that cuts an image (then it preempts).
    if (room >= 1) {
      const int32_t fits = keep_spans_whole(r, r->num_computed_tokens, std::min(n, room));
      if (fits >= 1) n = fits;
    }
    schedule_running(r, n, step);
  }

  // 2b. Speculative decoding: the drafts of the decodes, with the budget prompt chunks left (a
  //     step busy with prefill is compute-bound, where drafts would not pay anyway), never
  //     preempting. After step 2, so the head keeps its chunk (the no-starvation argument).
  schedule_drafts(step);

  // 3. Admissions, in order, while there is budget, a free sequence slot and room for the
  //    request's first chunk. Skipped after a preemption (memory is short: admitting would only
  //    cause more preemption).
  if (!step.preempted_any) {
    const std::vector<Request*> queue = waiting_;
    for (Request* r : queue) {
      if (step.budget < 1 || static_cast<int32_t>(running_.size()) >= config_.max_num_seqs) break;
      const std::span<const int32_t> tokens(r->tokens);
      const std::vector<kv::ContentSpan> spans = content_spans(*r);
      int32_t cached = kv_.find_cached_prefix(r->id, tokens, r->cache_salt, spans);
      int32_t n = cut_chunk(r, cached, std::min(r->num_tokens() - cached, step.budget));
      if (n < 1) break;  // an image's tokens do not fit the budget left: wait, in order
      kv::Allocation a = kv_.allocate(r->id, cached + n);
      if (a.status == kv::AllocStatus::kStalePrefix) {
        cached = kv_.find_cached_prefix(r->id, tokens, r->cache_salt, spans);
        n = cut_chunk(r, cached, std::min(r->num_tokens() - cached, step.budget));
        if (n < 1) break;
        a = kv_.allocate(r->id, cached + n);
      }
      if (!a) break;  // strict order: nobody overtakes the head of the queue
      remove_from(waiting_, r);
      r->num_computed_tokens = cached;
      if (r->num_cached_prompt_tokens < 0) r->num_cached_prompt_tokens = cached;
      r->status = RequestStatus::kRunning;
      insert_running(r);
      step.index[r->id] = plan.scheduled.size();
      plan.scheduled.push_back({r, cached, n, false, 0, {}, {}});
      step.budget -= n;
    }
  }

  // Drop entries of requests preempted after being scheduled; fill in tables and sample flags
  // now that no table changes any more in this step.
  std::erase_if(plan.scheduled, [](const ScheduledRequest& e) { return e.num_tokens == 0; });
  for (ScheduledRequest& e : plan.scheduled) {
    e.block_table = kv_.block_table(e.request->id);
    e.window_block_table = kv_.window_block_table(e.request->id);
    e.sample = e.start + e.num_tokens == e.request->num_tokens();
    plan.num_batched_tokens += e.num_tokens;
  }
  assert(plan.num_batched_tokens <= config_.max_num_batched_tokens);
  if (!plan.scheduled.empty()) ++num_steps_;
  return plan;
}

void Scheduler::commit(const SchedulePlan& plan) {
  for (const ScheduledRequest& e : plan.scheduled) {
    Request* r = e.request;
    assert(r->num_computed_tokens == e.start);
    r->num_computed_tokens = e.start + e.num_tokens;
    kv_.mark_computed(r->id, r->num_computed_tokens, r->tokens);
  }
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.num_running = static_cast<int32_t>(running_.size());
  s.num_waiting = static_cast<int32_t>(waiting_.size());
  s.num_preemptions = num_preemptions_;
  s.num_steps = num_steps_;
  return s;
}

}  // namespace cadenza::sched
