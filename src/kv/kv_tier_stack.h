// KvTierStack: the tiers below the KV block pool, fastest first (host memory, then disk), for
// KvCacheManager. A cached block the pool evicts is demoted into the first tier; what a tier
// evicts to stay within its budget cascades into the next; what the last tier evicts is dropped.
// A prefix lookup that misses the pool asks the stack (promote): the first tier holding the hash
// copies the payload out. The memory tier then drops its copy (the block lives in the pool again;
// it comes back down when the pool evicts it); the disk tier keeps its file (it is the copy that
// survives a restart, and writing it again would cost more than keeping it).
//
//   auto stack = KvTierStack(block_bytes, {MemoryTier(...), DiskTier::open(...)});
//   stack.demote(hash, payload);          // pool eviction
//   if (stack.promote(hash, buf)) ...     // prefix hit below the pool
//   stack.persist(hash, payload);         // shutdown: the pool's cached blocks to the last tier
//
// Ownership: owns its tiers. Thread-safety: none; the engine thread only.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "kv/kv_tier.h"

namespace cadenza::kv {

class KvTierStack {
 public:
  // `tiers` fastest first, at least one; every payload is `block_bytes` long.
  KvTierStack(size_t block_bytes, std::vector<std::unique_ptr<KvTier>> tiers);

  size_t block_bytes() const { return block_bytes_; }
  bool contains(const BlockHash& hash) const;
  // Stores an evicted pool block in the first tier (cascading that tier's evictions down).
  void demote(const BlockHash& hash, std::span<const uint8_t> payload);
  // Copies the block into `out` (block_bytes() long) from the first tier that has it and counts a
  // promotion there. False on a miss (or when every copy found was damaged).
  bool promote(const BlockHash& hash, std::span<uint8_t> out);
  // Stores the block in the last tier only (it must survive a restart); an existing entry is
  // just marked used. Used at shutdown for the pool's cached blocks.
  void persist(const BlockHash& hash, std::span<const uint8_t> payload);
  // Moves every entry of the tiers above the last into the last one (oldest first), so that a
  // restart finds them. No-op with one tier.
  void flush_to_last();
  // Drops the entries of the tier named `name` ("memory" or "disk"), or of all tiers when empty.
  // Returns the bytes freed, or nullopt when no tier has that name.
  std::optional<int64_t> clear(std::string_view name = {});

  const std::vector<std::unique_ptr<KvTier>>& tiers() const { return tiers_; }

 private:
  void put_from(size_t level, const BlockHash& hash, std::span<const uint8_t> payload);

  size_t block_bytes_;
  std::vector<std::unique_ptr<KvTier>> tiers_;
};

}  // namespace cadenza::kv
