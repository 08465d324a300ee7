// MemoryTier: a KvTier in host RAM (--kv-offload-memory): an LRU list of payload copies with a
// hard byte budget (payload bytes; the per-entry bookkeeping, ~100 bytes, is not counted).
// Ownership: owns its copies. Thread-safety: none (see kv_tier.h).
#pragma once

#include <list>
#include <unordered_map>
#include <vector>

#include "kv/kv_tier.h"

namespace cadenza::kv {

class MemoryTier final : public KvTier {
 public:
  explicit MemoryTier(int64_t capacity_bytes);

  std::string_view name() const override { return "memory"; }
  bool contains(const BlockHash& hash) const override { return index_.count(hash) != 0; }
  bool put(const BlockHash& hash, std::span<const uint8_t> payload,
           const KvTierSink& evicted = {}) override;
  bool get(const BlockHash& hash, std::span<uint8_t> out) override;
  void erase(const BlockHash& hash) override;
  int64_t clear() override;
  void for_each_lru(const KvTierSink& fn) override;
  KvTierStats stats() const override;
  void count_promotion() override { ++stats_.promotions; }

 private:
  struct Entry {
    BlockHash hash;
    std::vector<uint8_t> payload;
  };
  std::list<Entry> lru_;  // front: least recently used
  std::unordered_map<BlockHash, std::list<Entry>::iterator, BlockHashHasher> index_;
  KvTierStats stats_;
};

}  // namespace cadenza::kv
