// StateSlots: which recurrent-state slot each request of a hybrid model holds (the sibling of
// KvCacheManager for the fixed-size part of its memory: model::KvCache's state slots, one per
// running sequence, beside its paged KV blocks). A request takes a slot when it is first
// scheduled and gives it back when it finishes, is aborted or is preempted (preemption
// recomputes from position 0, which clears the state). A fork takes a slot for the child; the
// caller copies the parent's state into it (model::KvCache::copy_state).
//
// Sizing: one slot per sequence the scheduler may run at once (max_num_seqs), so acquire never
// fails for a scheduled request; it returns nullopt only if the caller breaks that bound.
// Thread-safety: none (the engine thread only).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace cadenza::kv {

class StateSlots {
 public:
  explicit StateSlots(int32_t num_slots);

  // The slot of `id`, taking a free one (lowest id first) if it holds none.
  std::optional<int32_t> acquire(RequestId id);
  // The slot of `id`, or nullopt.
  std::optional<int32_t> find(RequestId id) const;
  // Gives back the slot of `id` (nothing when it holds none).
  void release(RequestId id);

  int32_t num_slots() const { return num_slots_; }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }

 private:
  int32_t num_slots_;
  std::vector<int32_t> free_;  // a stack, lowest id on top
  std::unordered_map<RequestId, int32_t> held_;
};

}  // namespace cadenza::kv
