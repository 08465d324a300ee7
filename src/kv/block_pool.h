// BlockPool: the ids 0..N-1 of the KV blocks of one model::KvCache, with a reference count each,
// an optional content hash (full, computed blocks only) and an LRU free queue.
//
// Block states:
//   used   ref_count > 0, not in the free queue; may be cached (hash registered: other requests
//          with the same prefix may share it).
//   free   ref_count == 0, in the free queue exactly once. A free *cached* block still holds
//          valid KV and stays findable by its hash until allocate() takes it (an eviction); a free
//          uncached block holds nothing of value.
// Free queue order: allocate() takes the head. release() puts uncached blocks at the head (reusing
// them loses nothing) and cached blocks at the tail, so cached blocks are evicted least recently
// released first. acquire() of a free cached block (a prefix hit) pulls it out from anywhere in
// the queue. Every operation is O(1): an intrusive doubly linked list over arrays, and a hash map
// from BlockHash to block id.
//
// Ownership: plain bookkeeping, no KV memory. Thread-safety: none; the engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "util/result.h"

namespace cadenza::kv {

class BlockPool {
 public:
  // All blocks start free and uncached, queued in id order (so the first allocations are 0, 1, ...).
  explicit BlockPool(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(meta_.size()); }
  int32_t num_free() const { return num_free_; }
  int32_t num_cached() const { return static_cast<int32_t>(index_.size()); }
  // Cached blocks that allocate() has taken (and so forgotten) since construction.
  int64_t evictions() const { return evictions_; }

  // Takes the head of the free queue with ref_count 1, forgetting its hash if it had one.
  // Precondition: num_free() > 0 (callers check capacity first, so running out is a bug).
  int32_t allocate();
  // One more user of `block` (used or free); a free block leaves the free queue.
  void acquire(int32_t block);
  // One user fewer; at zero the block joins the free queue (see the order above).
  void release(int32_t block);

  // The block holding `hash`, or -1.
  int32_t lookup(const BlockHash& hash) const;
  // Registers `hash` for a used, uncached block whose KV is now complete. Returns false (and
  // changes nothing) when another block already holds that hash: two requests computed the same
  // prefix at once; the first one's block stays the shared copy, this one stays private.
  bool cache(int32_t block, const BlockHash& hash);
  // Forgets the hash of one used, cached block whose KV its only user is about to overwrite
  // (KvCacheManager::trim into a registered block). No-op for an uncached block. Precondition:
  // ref_count(block) > 0 (a free cached block is only ever forgotten by allocate's eviction).
  void uncache(int32_t block);
  // Forgets every hash (used blocks keep their KV and users; only future sharing is lost).
  void clear_cache();

  int32_t ref_count(int32_t block) const { return meta_[idx(block)].ref_count; }
  bool is_cached(int32_t block) const { return meta_[idx(block)].cached; }
  const BlockHash& hash(int32_t block) const { return hashes_[idx(block)]; }  // if is_cached

  // Called by allocate() when it takes a free cached block, before the hash is forgotten and while
  // the block's KV is still intact (KV tiers copy it out here). Empty: nothing is called.
  void set_eviction_hook(std::function<void(int32_t block, const BlockHash& hash)> hook) {
    evict_hook_ = std::move(hook);
  }
  // Every cached block, least recently useful first: free ones in queue order (head first), then
  // used ones by id. O(N); for persisting the cache at shutdown.
  std::vector<int32_t> cached_blocks() const;

  // The free queue from head (next to be allocated) to tail. O(N), for tests and debugging.
  std::vector<int32_t> free_queue() const;
  // Checks every internal invariant (links, counts, index <-> stored hashes). O(N); for tests.
  Status check_invariants() const;

 private:
  struct Meta {
    int32_t ref_count = 0;
    int32_t prev = -1;  // free-queue links; -1 at the ends and while used
    int32_t next = -1;
    bool cached = false;
  };

  static size_t idx(int32_t block) { return static_cast<size_t>(block); }
  void unlink(int32_t block);
  void push_head(int32_t block);
  void push_tail(int32_t block);

  std::vector<Meta> meta_;
  std::vector<BlockHash> hashes_;  // valid where meta_.cached; kept apart so Meta stays small
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> index_;
  int32_t head_ = -1;
  int32_t tail_ = -1;
  int32_t num_free_ = 0;
  int64_t evictions_ = 0;
  std::function<void(int32_t, const BlockHash&)> evict_hook_;
};

}  // namespace cadenza::kv
