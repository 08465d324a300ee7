// KvTier: one level below the KV block pool that keeps the payloads of evicted prefix-cache blocks
// (every layer's K/V rows of one block, as model::KvCache::read_block writes them), keyed by the
// block's chained content hash (block_hash.h), so that a later request with the same prefix gets
// them back instead of recomputing them. Implementations: MemoryTier (host RAM), DiskTier (files
// that outlive the process). KvTierStack chains them under the pool.
//
// Contract shared by all tiers:
//   - a hard byte budget (capacity_bytes): put() evicts least recently used entries until the new
//     one fits, handing each evicted payload to the caller's sink (the next tier down), and never
//     holds more than the budget; a payload larger than the whole budget is refused (false);
//   - get() copies an entry out bit-exactly and counts as a use (LRU); a damaged entry is never
//     returned (false, dropped);
//   - payloads are opaque bytes of one fixed size per stack (the model's block size in bytes).
// Ownership: each tier owns its copies. Thread-safety: none; the engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "kv/block_hash.h"

namespace cadenza::kv {

struct KvTierStats {
  int64_t bytes = 0;           // held now (payloads; the disk tier counts whole files)
  int64_t capacity_bytes = 0;  // the budget
  int64_t blocks = 0;          // entries held now
  int64_t hits = 0;            // get() calls that returned a block
  int64_t promotions = 0;      // blocks handed up to the pool (a hit that was used)
  int64_t demotions = 0;       // blocks stored here by put() (from the pool or the tier above)
  int64_t evictions = 0;       // entries dropped (or handed down) to stay within the budget
  int64_t rejected = 0;        // entries found damaged or foreign and skipped (disk)
};

// Receives an entry a tier evicts to make room (the payload is valid only during the call).
using KvTierSink = std::function<void(const BlockHash&, std::span<const uint8_t>)>;

class KvTier {
 public:
  virtual ~KvTier() = default;
  // "memory" or "disk": the metrics label and the /v1/cache/clear name.
  virtual std::string_view name() const = 0;
  virtual bool contains(const BlockHash& hash) const = 0;
  // Stores a copy of `payload` under `hash` (an existing entry is only marked used). Evicted
  // entries go to `evicted` when given. False when the payload is larger than the budget or
  // storing failed (disk full: logged); nothing is held then.
  virtual bool put(const BlockHash& hash, std::span<const uint8_t> payload,
                   const KvTierSink& evicted = {}) = 0;
  // Copies the entry into `out` (out.size() must equal its length). False on a miss or a
  // damaged entry. Counts a hit.
  virtual bool get(const BlockHash& hash, std::span<uint8_t> out) = 0;
  virtual void erase(const BlockHash& hash) = 0;
  // Drops every entry; returns the bytes freed.
  virtual int64_t clear() = 0;
  // Calls `fn` for every entry from least to most recently used (flushing a tier into another).
  virtual void for_each_lru(const KvTierSink& fn) = 0;
  virtual KvTierStats stats() const = 0;
  // Counts a promotion (KvTierStack calls it when a hit went up to the pool).
  virtual void count_promotion() = 0;
};

}  // namespace cadenza::kv
