// EngineCore, n > 1 (SamplingParams::n): the bookkeeping of one request's parallel samples (see
// engine_core.h). Sample 0 (internal id == public id) is scheduled at once; samples 1..n-1 wait in
// pending_ under it until its prompt is computed, then are forked from it or queued. groups_ maps
// the public id to the internal ids of its live samples, so abort(public id) reaches them all.
#include <optional>

#include "engine/engine_core.h"

namespace cadenza::engine {

void EngineCore::join_group(RequestId public_id, int32_t index, std::unique_ptr<Request> r) {
  groups_[public_id].push_back(r->id);
  if (index == 0)
    scheduler_->add(std::move(r));
  else
    pending_[public_id].push_back(std::move(r));  // queued when sample 0's prompt is computed
}

void EngineCore::leave_group(RequestId public_id, RequestId id) {
  auto g = groups_.find(public_id);
  if (g == groups_.end()) return;
  std::erase(g->second, id);
  if (g->second.empty()) groups_.erase(g);
}

bool EngineCore::abort(RequestId id) {
  auto g = groups_.find(id);
  if (g == groups_.end()) return scheduler_->abort(id);
  // Samples still pending go with their parent (sample 0, internal id == id), which is live.
  bool any = false;
  for (RequestId member : g->second) any = scheduler_->abort(member) || any;
  return any;
}

std::vector<Request*> EngineCore::release_pending(RequestId parent,
                                                  std::vector<RequestOutput>& outputs) {
  std::vector<Request*> forked;
  auto it = pending_.find(parent);
  if (it == pending_.end()) return forked;
  std::vector<std::unique_ptr<Request>> samples = std::move(it->second);
  pending_.erase(it);
  for (std::unique_ptr<Request>& r : samples) {
    const RequestId id = r->id;
    std::optional<kv::BlockCopy> copy = scheduler_->fork(r, parent);
    if (!copy) {
      scheduler_->add(std::move(r));  // not now: it shares the prompt through the prefix cache
      continue;
    }
    if (copy->num_tokens > 0) {
      if (Status st = copy_kv(*copy); !st) {
        RequestOutput out = new_output(id);  // a bug if it happens: the ids come from the manager
        out.error = st.error();
        finish(id, FinishReason::kError, out);
        outputs.push_back(std::move(out));
        continue;
      }
    }
    if (state_slots_) {  // the child continues from the parent's state after the prompt
      const std::optional<int32_t> from = state_slots_->find(parent);
      const std::optional<int32_t> to = state_slots_->acquire(id);
      Status st = from && to ? kv_cache_->copy_state(*from, *to)
                             : Status(Error("engine: no recurrent-state slot for a forked sample"));
      if (!st) {
        RequestOutput out = new_output(id);  // a bug if it happens: slots match max_num_seqs
        out.error = st.error();
        finish(id, FinishReason::kError, out);
        outputs.push_back(std::move(out));
        continue;
      }
    }
    Request* child = scheduler_->find(id);
    mark_scheduled(*child, *streams_.at(id), Clock::now());  // it starts now: queue time ends
    forked.push_back(child);
  }
  return forked;
}

void EngineCore::drop_pending(RequestId parent, FinishReason reason, const std::string& error,
                              std::vector<RequestOutput>& outputs) {
  auto it = pending_.find(parent);
  if (it == pending_.end()) return;
  std::vector<std::unique_ptr<Request>> samples = std::move(it->second);
  pending_.erase(it);
  for (std::unique_ptr<Request>& r : samples) {  // never scheduled: no blocks, no tokens
    const RequestId id = r->id;
    RequestOutput out = new_output(id);
    out.error = error;
    finish(id, reason, out, std::move(r));
    outputs.push_back(std::move(out));
  }
}

}  // namespace cadenza::engine
