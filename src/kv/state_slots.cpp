#include "kv/state_slots.h"

namespace cadenza::kv {

StateSlots::StateSlots(int32_t num_slots) : num_slots_(num_slots) {
  for (int32_t s = num_slots - 1; s >= 0; --s) free_.push_back(s);
}

std::optional<int32_t> StateSlots::acquire(RequestId id) {
  if (auto it = held_.find(id); it != held_.end()) return it->second;
  if (free_.empty()) return std::nullopt;
  const int32_t slot = free_.back();
  free_.pop_back();
  held_.emplace(id, slot);
  return slot;
}

std::optional<int32_t> StateSlots::find(RequestId id) const {
  auto it = held_.find(id);
  if (it == held_.end()) return std::nullopt;
  return it->second;
}

void StateSlots::release(RequestId id) {
  auto it = held_.find(id);
  if (it == held_.end()) return;
  free_.push_back(it->second);
  held_.erase(it);
}

}  // namespace cadenza::kv
