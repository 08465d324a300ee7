// KvCacheManager: hands out KV blocks to requests and shares full blocks between requests with
// the same prefix (automatic prefix caching). It is the only owner of block ids; the scheduler sees
// a request's block table and token counts, nothing of the pool.
//
// How the scheduler uses it (one engine step):
//   waiting request, first time:
//     cached = find_cached_prefix(id, prompt, extra_key);   // tokens it need not compute
//     n      = min(prompt.size() - cached, token budget);   // >= 1 by construction
//     a      = allocate(id, cached + n);                    // kNoRoom: stop admitting (or preempt)
//     request.num_computed_tokens = cached;
//   running request:  a = allocate(id, num_computed + n);   // kNoRoom: preempt someone, retry
//   after the forward pass:  mark_computed(id, num_computed_after, all_tokens_so_far);
//   finished / aborted / preempted:  free(id);
//   speculative decoding, rejected draft positions:  trim(id, num_accepted_end);
// Block tables: position p of a request lives in block table[p / block_size] at p % block_size,
// exactly model::Batch's contract; pass block_table(id) with each batch.
//
// Sharing rules (why this is safe without copy-on-write): only blocks that are full of computed
// tokens are ever shared (by hash, or by fork()); such blocks are immutable, since a request only
// writes positions >= its num_computed_tokens. A request's partial last block is always private.
//
// Ownership: bookkeeping only, no KV memory (that is model::KvCache, built with the same
// num_blocks and block_size). Thread-safety: none; used by the engine thread only. Spans returned
// stay valid until the next call that mutates the same request (allocate, trim, fork of it, free).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/kv_tier_stack.h"

namespace cadenza::kv {

using RequestId = uint64_t;

struct KvCacheConfig {
  int32_t num_blocks = 0;             // > 0; the same as model::KvCacheOptions::num_blocks
  int32_t block_size = 16;            // tokens per block, > 0
  bool enable_prefix_caching = true;  // off: no lookups, no registration, no sharing by hash
  // Sliding-window layers' own block group (both > 0 to enable): a second pool of
  // num_window_blocks blocks backs the model's windowed layers (model::KvCache built with the
  // same num_window_blocks), and each request gets a second table for them
  // (window_block_table). A token at position p of a windowed layer reads positions
  // > p - window only, so the window blocks wholly behind the next position's window are released
  // as the request advances (at its next allocate). 0: windowed layers use the main table.
  int32_t window = 0;
  int32_t num_window_blocks = 0;
};

struct KvCacheStats {
  int64_t queries = 0;       // find_cached_prefix calls
  int64_t hits = 0;          // ... that found at least one block
  int64_t query_tokens = 0;  // prompt tokens looked up
  int64_t hit_tokens = 0;    // ... found cached (hit rate = hit_tokens / query_tokens)
  int64_t evictions = 0;     // cached blocks reused for other content
  int64_t tier_hit_blocks = 0;  // blocks find_cached_prefix brought back from a KV tier
};

// Copies one block's payload (every layer's K/V rows, KvTierStack::block_bytes() long) out of and
// into the KV memory (model::KvCache::read_block / write_block). False: the copy failed.
struct KvBlockIo {
  std::function<bool(int32_t block, std::span<uint8_t> out)> read;
  std::function<bool(int32_t block, std::span<const uint8_t> in)> write;
};

enum class AllocStatus {
  kOk,
  kNoRoom,       // not enough free blocks; nothing changed
  // The blocks find_cached_prefix reported were evicted (by other allocations, or
  // reset_prefix_cache) before this request's first allocate. Nothing changed: call
  // find_cached_prefix again and use its new count. Cannot happen when allocate follows find
  // for the same request with no other allocate in between.
  kStalePrefix,
};

struct Allocation {
  AllocStatus status = AllocStatus::kNoRoom;
  std::span<const int32_t> block_table;  // the whole table when kOk, empty otherwise
  explicit operator bool() const { return status == AllocStatus::kOk; }
};

// A KV copy the engine must perform before the child of fork() runs: in every layer, slots
// [0, num_tokens) of block `src` to the same slots of block `dst` (keys and values).
struct BlockCopy {
  int32_t src = -1;
  int32_t dst = -1;
  int32_t num_tokens = 0;  // 0: nothing to copy
  // With a window group: the same slots from window block window_src to window_dst, in the
  // windowed layers (model::KvCache::copy_window_block). -1: none.
  int32_t window_src = -1;
  int32_t window_dst = -1;
};

struct ForkResult {
  AllocStatus status = AllocStatus::kNoRoom;  // kOk or kNoRoom (nothing changed)
  std::span<const int32_t> block_table;       // the child's table
  BlockCopy copy;
  explicit operator bool() const { return status == AllocStatus::kOk; }
};

// What trim() did. On kOk the request's table covers exactly the new length; on kNoRoom nothing
// changed.
struct TrimResult {
  AllocStatus status = AllocStatus::kNoRoom;  // kOk, or kNoRoom (only for a cut in a shared block)
  std::span<const int32_t> block_table;       // the whole (shorter) table when kOk, empty otherwise
  int32_t num_released_blocks = 0;            // table entries dropped (each released once)
  // When the cut fell inside a block shared with another request, that block was replaced by a
  // fresh private one: the engine must copy these slots (the kept positions) into it before the
  // request's next step, exactly like fork()'s copy. num_tokens 0: nothing to copy.
  BlockCopy copy;
  explicit operator bool() const { return status == AllocStatus::kOk; }
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheConfig& config);

  // How many leading tokens of `tokens` (the prompt) are already cached under `extra_key`:
  // a multiple of block_size, always < tokens.size() (the last token is computed so that its
  // logits exist). Records the found blocks for this request's first allocate (they are not
  // pinned: see kStalePrefix). Counts a query. Precondition: the request holds no blocks yet
  // (calling it again before allocate replaces the earlier result). Returns 0 when caching is
  // off (and records nothing: no stats move).
  // `spans`: positions whose KV depends on more than their token ids (image embeddings); they
  // enter the hash of every block they overlap (block_hash.h), here and in later mark_computed
  // calls of this request (and of its forks), so an image's blocks match only the same image.
  int32_t find_cached_prefix(RequestId id, std::span<const int32_t> tokens,
                             std::string_view extra_key = {},
                             std::span<const ContentSpan> spans = {});

  // Whether allocate(id, num_tokens(id) + num_new_tokens) would return kOk.
  bool can_allocate(RequestId id, int32_t num_new_tokens) const;

  // Grows the request's block table to cover `total_tokens` token positions (whole blocks; it
  // never shrinks) and returns it. The first call for a request takes the blocks recorded by
  // find_cached_prefix (total_tokens must be >= that count) before drawing new ones, so its own
  // new blocks never evict them. A request never seen by find_cached_prefix does not take part in
  // prefix caching. On kNoRoom / kStalePrefix nothing changes.
  Allocation allocate(RequestId id, int32_t total_tokens);

  // The request has computed the KV of positions [0, num_computed_tokens); `tokens` holds at least
  // that many (prompt followed by generated tokens). Blocks that became full are registered by
  // hash so that later requests can share them. Precondition: allocated, monotone count,
  // num_computed_tokens <= num_tokens(id).
  void mark_computed(RequestId id, int32_t num_computed_tokens, std::span<const int32_t> tokens);

  // Releases the request's blocks, tail first, so that under pressure a request's last blocks
  // are evicted before its first ones (the first ones are the most shareable). Unknown ids are
  // ignored (abort of a request that never got blocks).
  void free(RequestId id);

  // Rolls the request back to its first `num_tokens` token positions (speculative decoding: the
  // rejected draft positions). Blocks wholly beyond the new length leave the table and are
  // released, tail first (a block another request also holds just loses one user; a cached one
  // stays findable, since its KV is still valid for the tokens it was hashed from).
  // num_tokens(id) becomes `num_tokens`; num_computed(id) becomes min(num_computed, num_tokens).
  // Positions [0, num_tokens) must hold the same tokens as before; later mark_computed calls
  // hash whatever tokens they are given from there on.
  //
  // The block the cut falls inside (when num_tokens is not a multiple of block_size) keeps its
  // first slots and will have the rest overwritten, so it must not stay findable by a hash of
  // its old full content, and a block another request holds must never be written:
  //   - held by this request only: it stays; if it was registered in the prefix cache, its hash
  //     is forgotten (the cache loses that entry, nobody loses KV);
  //   - held by other requests too (shared by a prefix hit or fork(), so full and immutable): this
  //     request gets a fresh private block in its place and `copy` names the kept slots to copy
  //     into it; the shared block is untouched for its other users. This needs one free block
  //     (the released tail blocks count): kNoRoom when there is none, and nothing changes.
  // Errors (nothing changes): unknown id, a request that holds no blocks yet (only a
  // find_cached_prefix result), num_tokens < 0 or > num_tokens(id). num_tokens == num_tokens(id)
  // is a no-op that returns kOk.
  Result<TrimResult> trim(RequestId id, int32_t num_tokens);

  // n > 1 sampling: `child` (a new id) gets `parent`'s table at its current state. Full computed
  // blocks are shared (ref_count + 1); every other block of the parent's table gets a fresh block,
  // and if the parent's last computed block is partial, `copy` says which KV slots the engine
  // must copy into the child's block before the child's next step. The child continues with the
  // same tokens and counts as the parent; from there they diverge.
  ForkResult fork(RequestId parent, RequestId child);

  // KV tiers below the pool (kv_tier_stack.h; borrowed, must outlive this manager, or null to
  // detach). With tiers, a cached block the pool evicts is copied out through `io` and demoted
  // instead of dropped, and find_cached_prefix continues a prefix past the pool: each block the
  // stack holds is copied into a free pool block (evicting, i.e. demoting, the pool's least
  // recently used cached block) and registered there, so it counts as found. Promotion stops at
  // the first block no tier holds or when no free block is left. Only with prefix caching on.
  void attach_tiers(KvTierStack* tiers, KvBlockIo io);
  // Copies every cached pool block into the last tier (shutdown, so a restart finds them);
  // returns how many. 0 without tiers.
  int64_t persist_to_tiers();

  // Hybrid models: a cached prefix of k blocks is usable only if `usable(hash of block k - 1)`
  // (the recurrent state after those k blocks was snapshotted: StateSnapshots::contains).
  // find_cached_prefix returns the longest usable prefix, and allocate reports kStalePrefix when
  // the found prefix stopped being usable. Empty (the default): every prefix is usable.
  void set_prefix_usable(std::function<bool(const BlockHash&)> usable) { usable_ = std::move(usable); }
  // The chain hash of full block `i` of request `id` (i < num_computed(id) / block_size, or a
  // block find_cached_prefix found); nullopt when it has none (unknown, caching off, i out of
  // range). The key of the recurrent-state snapshot taken after that block.
  std::optional<BlockHash> block_hash(RequestId id, int32_t i) const;

  // Forgets every cached hash: later lookups miss until blocks are computed again. Running
  // requests are unaffected (they keep their blocks); blocks found but not yet allocated go stale.
  void reset_prefix_cache();

  bool contains(RequestId id) const { return requests_.count(id) != 0; }
  std::span<const int32_t> block_table(RequestId id) const;  // empty when unknown
  // The request's table in the window group (window_blocks() > 0), as long as block_table(id):
  // entries wholly behind the window are -1 (released, or never held after a prefix hit); the
  // entries the next step reads and writes are valid. Empty without a window group.
  std::span<const int32_t> window_block_table(RequestId id) const;
  // Tokens the request's table can cover without blocks beyond the free ones (and, in the
  // window group, the ones it would release itself): the largest total_tokens allocate could
  // grant. 0 for an unknown request.
  int32_t max_allocatable_tokens(RequestId id) const;
  // Blocks the request holds: main table, window table (entries >= 0).
  int32_t num_held_blocks(RequestId id) const;
  int32_t num_held_window_blocks(RequestId id) const;
  int32_t num_tokens(RequestId id) const;     // positions covered by allocate (or found so far)
  int32_t num_computed(RequestId id) const;   // last mark_computed count (or found so far)

  int32_t block_size() const { return config_.block_size; }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t num_free_blocks() const { return pool_.num_free(); }  // includes evictable cached ones
  // used blocks / all blocks, in [0, 1]; with a window group, the fuller of the two pools.
  double usage() const;
  bool has_window_group() const { return wpool_ != nullptr; }
  int32_t window() const { return config_.window; }
  int32_t num_window_blocks() const { return wpool_ ? wpool_->num_blocks() : 0; }
  int32_t num_free_window_blocks() const { return wpool_ ? wpool_->num_free() : 0; }
  const BlockPool* window_pool() const { return wpool_.get(); }  // null without a window group
  KvCacheStats stats() const;
  bool prefix_caching() const { return config_.enable_prefix_caching; }
  const BlockPool& pool() const { return pool_; }  // read-only view for tests and metrics

 private:
  struct RequestState {
    std::vector<int32_t> blocks;    // the block table
    std::vector<BlockHash> hashes;  // hashes[i]: chain hash of full block i, computed lazily
    BlockHash root;                 // parent of hashes[0]
    std::vector<ContentSpan> spans;  // find_cached_prefix's: mixed into the blocks they overlap
    bool caching = false;           // takes part in prefix caching (went through find)
    bool allocated = false;         // false: only a find result so far
    int32_t num_found_blocks = 0;   // find's result, taken by the first allocate
    int32_t num_tokens = 0;
    int32_t num_computed = 0;
    int32_t num_registered = 0;     // blocks [0, num_registered) have been offered to the index
    // Window group: the window table (same length as blocks); entries [0, wheld_from) are -1,
    // the rest held. Before the first allocate, wheld_from is the first found window block.
    std::vector<int32_t> wblocks;
    int32_t wheld_from = 0;
  };

  struct Plan {
    AllocStatus status = AllocStatus::kNoRoom;
    int32_t new_blocks = 0;
  };

  int32_t blocks_for(int32_t tokens) const;
  // What allocate(id, total_tokens) would do; `st` may be null (an unknown request).
  Plan plan(const RequestState* st, int32_t total_tokens) const;
  // Window group: whether the new blocks fit the window pool (counting found blocks taken and
  // blocks the request releases behind its window).
  bool window_fits(const RequestState* st, int32_t total_tokens, AllocStatus& stale) const;
  // The first block a step starting at position `pos` reads in a windowed layer.
  int32_t window_first_block(int32_t pos) const;
  // Window blocks of `st` wholly behind its next position's window that no one else holds.
  int32_t window_releasable(const RequestState& st) const;
  // Releases them (and shared ones: they just lose this user), oldest first.
  void release_behind_window(RequestState& st);
  // The longest usable prefix of found <= num_full blocks (window blocks, usable_).
  int32_t usable_prefix(RequestState& st, int32_t num_full) const;
  // Extends st.hashes to cover full block `i` of `tokens`.
  void ensure_hash(RequestState& st, int32_t i, std::span<const int32_t> tokens) const;
  // Brings block `hash` from the tiers into a free pool block, registered and free (at the
  // queue's tail). Returns the block, or -1 (no tier holds it, no free block, a failed copy).
  int32_t promote(const BlockHash& hash);
  void demote(int32_t block, const BlockHash& hash);

  KvCacheConfig config_;
  BlockPool pool_;
  std::unique_ptr<BlockPool> wpool_;  // the window group's pool, or null
  std::function<bool(const BlockHash&)> usable_;
  std::unordered_map<RequestId, RequestState> requests_;
  KvCacheStats stats_;
  KvTierStack* tiers_ = nullptr;
  KvBlockIo io_;
  std::vector<uint8_t> payload_;  // one block's bytes being promoted
  std::vector<uint8_t> evicted_;  // one block's bytes being demoted (promote's draw may demote)
};

}  // namespace cadenza::kv
