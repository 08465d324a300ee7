#include "kv/memory_tier.h"

#include <cassert>
#include <cstring>

namespace cadenza::kv {

MemoryTier::MemoryTier(int64_t capacity_bytes) {
  assert(capacity_bytes >= 0);
  stats_.capacity_bytes = capacity_bytes;
}

bool MemoryTier::put(const BlockHash& hash, std::span<const uint8_t> payload,
                     const KvTierSink& evicted) {
  if (auto it = index_.find(hash); it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second);  // same content (same hash): just mark it used
    return true;
  }
  const auto size = static_cast<int64_t>(payload.size());
  if (size > stats_.capacity_bytes) return false;
  while (stats_.bytes + size > stats_.capacity_bytes) {
    Entry& victim = lru_.front();
    if (evicted) evicted(victim.hash, victim.payload);
    stats_.bytes -= static_cast<int64_t>(victim.payload.size());
    ++stats_.evictions;
    index_.erase(victim.hash);
    lru_.pop_front();
  }
  lru_.push_back(Entry{hash, std::vector<uint8_t>(payload.begin(), payload.end())});
  index_.emplace(hash, std::prev(lru_.end()));
  stats_.bytes += size;
  ++stats_.demotions;
  return true;
}

bool MemoryTier::get(const BlockHash& hash, std::span<uint8_t> out) {
  auto it = index_.find(hash);
  if (it == index_.end() || it->second->payload.size() != out.size()) return false;
  std::memcpy(out.data(), it->second->payload.data(), out.size());
  lru_.splice(lru_.end(), lru_, it->second);
  ++stats_.hits;
  return true;
}

void MemoryTier::erase(const BlockHash& hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return;
  stats_.bytes -= static_cast<int64_t>(it->second->payload.size());
  lru_.erase(it->second);
  index_.erase(it);
}

int64_t MemoryTier::clear() {
  const int64_t freed = stats_.bytes;
  lru_.clear();
  index_.clear();
  stats_.bytes = 0;
  return freed;
}

void MemoryTier::for_each_lru(const KvTierSink& fn) {
  for (const Entry& e : lru_) fn(e.hash, e.payload);
}

KvTierStats MemoryTier::stats() const {
  KvTierStats s = stats_;
  s.blocks = static_cast<int64_t>(index_.size());
  return s;
}

}  // namespace cadenza::kv
