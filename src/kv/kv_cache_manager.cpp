#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <cassert>
#include <cstdint>

namespace cadenza::kv {

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : config_(config), pool_(config.num_blocks) {
  assert(config.num_blocks > 0 && config.block_size > 0);
  assert(config.window >= 0 && config.num_window_blocks >= 0);
  if (config.window > 0 && config.num_window_blocks > 0)
    wpool_ = std::make_unique<BlockPool>(config.num_window_blocks);
}

int32_t KvCacheManager::window_first_block(int32_t pos) const {
  return std::max(0, pos - config_.window + 1) / config_.block_size;
}

int32_t KvCacheManager::window_releasable(const RequestState& st) const {
  const int32_t lo = std::min(window_first_block(st.num_computed), static_cast<int32_t>(st.wblocks.size()));
  int32_t n = 0;
  for (int32_t i = st.wheld_from; i < lo; ++i)
    if (wpool_->ref_count(st.wblocks[static_cast<size_t>(i)]) == 1) ++n;
  return n;
}

void KvCacheManager::release_behind_window(RequestState& st) {
  const int32_t lo = std::min(window_first_block(st.num_computed), static_cast<int32_t>(st.wblocks.size()));
  // Oldest first: released cached blocks queue at the tail, so the newest (the ones a request
  // with a longer shared prefix needs for its own window) are evicted last.
  for (int32_t i = st.wheld_from; i < lo; ++i) {
    wpool_->release(st.wblocks[static_cast<size_t>(i)]);
    st.wblocks[static_cast<size_t>(i)] = -1;
  }
  st.wheld_from = std::max(st.wheld_from, lo);
}

int32_t KvCacheManager::usable_prefix(RequestState& st, int32_t num_full) const {
  if (!wpool_ && !usable_) return num_full;
  // run[i]: how many consecutive blocks ending at block i the window pool holds.
  std::vector<int32_t> run;
  if (wpool_) {
    run.resize(static_cast<size_t>(num_full));
    for (int32_t i = 0; i < num_full; ++i) {
      const bool hit = wpool_->lookup(st.hashes[static_cast<size_t>(i)]) >= 0;
      run[static_cast<size_t>(i)] = hit ? (i > 0 ? run[static_cast<size_t>(i - 1)] : 0) + 1 : 0;
    }
  }
  int32_t k = num_full;
  for (; k > 0; --k) {
    const BlockHash& last = st.hashes[static_cast<size_t>(k - 1)];
    // The next position, k * B, reads the window blocks [window_first_block(k * B), k).
    const bool window_ok =
        !wpool_ || run[static_cast<size_t>(k - 1)] >= k - window_first_block(k * config_.block_size);
    if (window_ok && (!usable_ || usable_(last))) break;
  }
  st.wheld_from = wpool_ ? std::min(k, window_first_block(k * config_.block_size)) : 0;
  return k;
}

int32_t KvCacheManager::blocks_for(int32_t tokens) const {
  return static_cast<int32_t>((static_cast<int64_t>(tokens) + config_.block_size - 1) / config_.block_size);
}

void KvCacheManager::ensure_hash(RequestState& st, int32_t i, std::span<const int32_t> tokens) const {
  const auto bs = static_cast<size_t>(config_.block_size);
  for (auto j = static_cast<int32_t>(st.hashes.size()); j <= i; ++j) {
    const BlockHash& parent = j == 0 ? st.root : st.hashes[static_cast<size_t>(j - 1)];
    st.hashes.push_back(chain_hash(parent, tokens.subspan(static_cast<size_t>(j) * bs, bs),
                                   j * config_.block_size, st.spans));
  }
}

int32_t KvCacheManager::find_cached_prefix(RequestId id, std::span<const int32_t> tokens,
                                           std::string_view extra_key,
                                           std::span<const ContentSpan> spans) {
  auto existing = requests_.find(id);
  assert((existing == requests_.end() || !existing->second.allocated) &&
         "find_cached_prefix on a request that already holds blocks");
  if (!config_.enable_prefix_caching) {
    if (existing != requests_.end()) requests_.erase(existing);
    return 0;
  }
  RequestState& st = requests_[id];
  st = RequestState{};
  st.caching = true;
  st.root = root_hash(extra_key);
  st.spans.assign(spans.begin(), spans.end());

  // At most (n - 1) / block_size blocks: a fully cached prompt would leave no token to compute,
  // and the last prompt token's logits are what the first sampled token comes from.
  const int32_t max_blocks =
      tokens.empty() ? 0 : static_cast<int32_t>((tokens.size() - 1) / static_cast<size_t>(config_.block_size));
  int32_t found = 0;
  // With tiers, the found pool blocks are pinned while the walk goes on: promoting a later block
  // draws a free block, which must not evict an earlier one of the same prefix.
  std::vector<int32_t> pinned;
  while (found < max_blocks) {
    ensure_hash(st, found, tokens);
    const BlockHash& h = st.hashes[static_cast<size_t>(found)];
    int32_t b = pool_.lookup(h);
    if (b < 0 && tiers_ != nullptr) b = promote(h);
    if (b < 0) break;
    if (tiers_ != nullptr) {
      pool_.acquire(b);
      pinned.push_back(b);
    }
    ++found;
  }
  found = usable_prefix(st, found);
  // Released last block first, like free(): the prefix's first blocks end nearest the tail.
  for (auto b = pinned.rbegin(); b != pinned.rend(); ++b) pool_.release(*b);
  st.num_found_blocks = found;
  st.num_tokens = st.num_computed = found * config_.block_size;

  ++stats_.queries;
  stats_.query_tokens += static_cast<int64_t>(tokens.size());
  if (found > 0) {
    ++stats_.hits;
    stats_.hit_tokens += st.num_tokens;
  }
  return st.num_tokens;
}

KvCacheManager::Plan KvCacheManager::plan(const RequestState* st, int32_t total_tokens) const {
  assert(total_tokens >= 0);
  const int32_t needed = blocks_for(total_tokens);
  Plan p;
  int32_t free_available = pool_.num_free();
  if (st == nullptr) {
    p.new_blocks = needed;
  } else if (st->allocated) {
    p.new_blocks = std::max(0, needed - static_cast<int32_t>(st->blocks.size()));
  } else {
    assert(total_tokens >= st->num_found_blocks * config_.block_size);
    for (int32_t i = 0; i < st->num_found_blocks; ++i) {
      const int32_t b = pool_.lookup(st->hashes[static_cast<size_t>(i)]);
      if (b < 0) {
        p.status = AllocStatus::kStalePrefix;
        return p;
      }
      // A free cached block we are about to take is no longer available for new blocks.
      if (pool_.ref_count(b) == 0) --free_available;
    }
    if (st->num_found_blocks > 0 && usable_ &&
        !usable_(st->hashes[static_cast<size_t>(st->num_found_blocks - 1)])) {
      p.status = AllocStatus::kStalePrefix;  // its state snapshot is gone
      return p;
    }
    p.new_blocks = needed - st->num_found_blocks;
  }
  p.status = p.new_blocks <= free_available ? AllocStatus::kOk : AllocStatus::kNoRoom;
  if (wpool_) {
    AllocStatus w = AllocStatus::kOk;
    if (!window_fits(st, total_tokens, w) && (w == AllocStatus::kStalePrefix || p.status == AllocStatus::kOk))
      p.status = w;
  }
  return p;
}

bool KvCacheManager::window_fits(const RequestState* st, int32_t total_tokens, AllocStatus& status) const {
  const int32_t needed = blocks_for(total_tokens);
  int32_t available = wpool_->num_free();
  int32_t fresh = needed;
  if (st != nullptr && st->allocated) {
    fresh = std::max(0, needed - static_cast<int32_t>(st->wblocks.size()));
    available += window_releasable(*st);
  } else if (st != nullptr) {
    for (int32_t i = st->wheld_from; i < st->num_found_blocks; ++i) {
      const int32_t b = wpool_->lookup(st->hashes[static_cast<size_t>(i)]);
      if (b < 0) {
        status = AllocStatus::kStalePrefix;
        return false;
      }
      if (wpool_->ref_count(b) == 0) --available;
    }
    fresh = needed - st->num_found_blocks;
  }
  if (fresh <= available) return true;
  status = AllocStatus::kNoRoom;
  return false;
}

bool KvCacheManager::can_allocate(RequestId id, int32_t num_new_tokens) const {
  auto it = requests_.find(id);
  const RequestState* st = it == requests_.end() ? nullptr : &it->second;
  const int32_t base = st == nullptr ? 0 : st->num_tokens;
  return plan(st, base + num_new_tokens).status == AllocStatus::kOk;
}

Allocation KvCacheManager::allocate(RequestId id, int32_t total_tokens) {
  auto it = requests_.find(id);
  const Plan p = plan(it == requests_.end() ? nullptr : &it->second, total_tokens);
  if (p.status != AllocStatus::kOk) return Allocation{p.status, {}};

  // From here on nothing can fail.
  RequestState& st = it == requests_.end() ? requests_[id] : it->second;
  if (!st.allocated) {
    // Found blocks first: pulling them off the free queue before drawing new blocks is what keeps
    // the new blocks from evicting them.
    for (int32_t i = 0; i < st.num_found_blocks; ++i) {
      const int32_t b = pool_.lookup(st.hashes[static_cast<size_t>(i)]);
      pool_.acquire(b);
      st.blocks.push_back(b);
    }
    st.num_registered = st.num_found_blocks;
    st.allocated = true;
    if (wpool_) {
      st.wblocks.assign(static_cast<size_t>(st.num_found_blocks), -1);
      for (int32_t i = st.wheld_from; i < st.num_found_blocks; ++i) {
        const int32_t b = wpool_->lookup(st.hashes[static_cast<size_t>(i)]);
        wpool_->acquire(b);
        st.wblocks[static_cast<size_t>(i)] = b;
      }
    }
  } else if (wpool_) {
    release_behind_window(st);
  }
  for (int32_t i = 0; i < p.new_blocks; ++i) st.blocks.push_back(pool_.allocate());
  if (wpool_)
    while (st.wblocks.size() < st.blocks.size()) st.wblocks.push_back(wpool_->allocate());
  st.num_tokens = std::max(st.num_tokens, total_tokens);
  return Allocation{AllocStatus::kOk, st.blocks};
}

void KvCacheManager::mark_computed(RequestId id, int32_t num_computed_tokens,
                                   std::span<const int32_t> tokens) {
  auto it = requests_.find(id);
  assert(it != requests_.end() && it->second.allocated);
  RequestState& st = it->second;
  assert(num_computed_tokens >= st.num_computed && num_computed_tokens <= st.num_tokens);
  assert(tokens.size() >= static_cast<size_t>(num_computed_tokens));
  st.num_computed = num_computed_tokens;
  if (!st.caching || !config_.enable_prefix_caching) return;

  const int32_t full = num_computed_tokens / config_.block_size;
  for (int32_t i = st.num_registered; i < full; ++i) {
    ensure_hash(st, i, tokens);
    const int32_t b = st.blocks[static_cast<size_t>(i)];
    // A block found by hash already carries this hash. Otherwise try to register; if another
    // block holds the same content already, this one simply stays private (a duplicate).
    // (Blocks at i >= num_registered are this request's own, so a cached one carries our hash.)
    assert(!pool_.is_cached(b) || pool_.hash(b) == st.hashes[static_cast<size_t>(i)]);
    if (!pool_.is_cached(b)) pool_.cache(b, st.hashes[static_cast<size_t>(i)]);
    if (wpool_) {  // the window layers' KV of the same tokens, under the same hash
      const int32_t wb = st.wblocks[static_cast<size_t>(i)];
      assert(wb >= 0 && "a window block is released only after it was registered");
      if (!wpool_->is_cached(wb)) wpool_->cache(wb, st.hashes[static_cast<size_t>(i)]);
    }
  }
  st.num_registered = std::max(st.num_registered, full);
}

void KvCacheManager::free(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  const std::vector<int32_t>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) pool_.release(*b);
  const std::vector<int32_t>& wblocks = it->second.wblocks;
  for (auto b = wblocks.rbegin(); b != wblocks.rend(); ++b)
    if (*b >= 0) wpool_->release(*b);
  requests_.erase(it);
}

Result<TrimResult> KvCacheManager::trim(RequestId id, int32_t num_tokens) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return make_error("kv trim: unknown request {}", id);
  RequestState& st = it->second;
  if (!st.allocated) return make_error("kv trim: request {} holds no blocks yet", id);
  if (num_tokens < 0 || num_tokens > st.num_tokens) {
    return make_error("kv trim: request {}: length {} outside [0, {}]", id, num_tokens, st.num_tokens);
  }

  const int32_t bs = config_.block_size;
  const int32_t keep_blocks = blocks_for(num_tokens);
  const auto table_size = static_cast<int32_t>(st.blocks.size());
  assert(table_size >= keep_blocks);
  // The block the cut falls inside keeps slots [0, kept_slots) and gets the rest rewritten.
  const int32_t kept_slots = num_tokens % bs;
  const int32_t cut_block = kept_slots > 0 ? st.blocks[static_cast<size_t>(keep_blocks - 1)] : -1;
  const bool cut_block_shared = cut_block >= 0 && pool_.ref_count(cut_block) > 1;
  if (wpool_ && window_first_block(std::min(st.num_computed, num_tokens)) < st.wheld_from) {
    return make_error("kv trim: request {}: length {} reaches back behind the window blocks it "
                      "released", id, num_tokens);
  }
  // The window group's cut block: held (it is at or after the new window's first block).
  const int32_t wcut = wpool_ && kept_slots > 0 ? st.wblocks[static_cast<size_t>(keep_blocks - 1)] : -1;
  const bool wcut_shared = wcut >= 0 && wpool_->ref_count(wcut) > 1;

  // Room for a private replacement: free blocks now, plus released tail blocks that nobody
  // else holds (they become free before the replacement is drawn).
  auto room = [&](const BlockPool& pool, const std::vector<int32_t>& table) {
    int32_t available = pool.num_free();
    for (int32_t i = keep_blocks; i < table_size; ++i) {
      const int32_t b = table[static_cast<size_t>(i)];
      if (b >= 0 && pool.ref_count(b) == 1) ++available;
    }
    return available >= 1;
  };
  if (cut_block_shared && !room(pool_, st.blocks)) return TrimResult{};
  if (wcut_shared && !room(*wpool_, st.wblocks)) return TrimResult{};

  // From here on nothing can fail. Tail first, like free(): the last blocks go nearest the head.
  for (int32_t i = table_size - 1; i >= keep_blocks; --i) pool_.release(st.blocks[static_cast<size_t>(i)]);
  st.blocks.resize(static_cast<size_t>(keep_blocks));
  if (wpool_) {
    for (int32_t i = table_size - 1; i >= keep_blocks; --i)
      if (st.wblocks[static_cast<size_t>(i)] >= 0) wpool_->release(st.wblocks[static_cast<size_t>(i)]);
    st.wblocks.resize(static_cast<size_t>(keep_blocks));
  }

  TrimResult r;
  r.status = AllocStatus::kOk;
  r.num_released_blocks = table_size - keep_blocks;
  const int32_t full_blocks = num_tokens / bs;  // blocks whose content trim leaves untouched
  if (cut_block_shared) {
    // A shared block is full of computed tokens, so all kept slots hold computed KV to copy.
    const int32_t fresh = pool_.allocate();
    pool_.release(cut_block);  // still held by its other users: it stays as it is
    st.blocks.back() = fresh;
    r.copy = BlockCopy{cut_block, fresh, kept_slots};
  } else if (cut_block >= 0) {
    // Private: this request will overwrite slots [kept_slots, bs), so the old full content must
    // not stay findable. (Blocks at index >= full_blocks are never registered after this.)
    pool_.uncache(cut_block);
  }
  if (wcut_shared) {  // the same in the window group
    const int32_t fresh = wpool_->allocate();
    wpool_->release(wcut);
    st.wblocks.back() = fresh;
    if (r.copy.num_tokens == 0) r.copy.num_tokens = kept_slots;
    r.copy.window_src = wcut;
    r.copy.window_dst = fresh;
  } else if (wcut >= 0) {
    wpool_->uncache(wcut);
  }

  st.num_tokens = num_tokens;
  st.num_computed = std::min(st.num_computed, num_tokens);
  st.num_registered = std::min(st.num_registered, full_blocks);
  // Hashes of blocks past the untouched ones describe tokens that are being replaced.
  if (st.hashes.size() > static_cast<size_t>(full_blocks)) st.hashes.resize(static_cast<size_t>(full_blocks));
  r.block_table = st.blocks;
  return r;
}

ForkResult KvCacheManager::fork(RequestId parent, RequestId child) {
  auto pit = requests_.find(parent);
  assert(pit != requests_.end() && pit->second.allocated && "fork of a request without blocks");
  assert(requests_.count(child) == 0 && "fork into an existing request id");
  const RequestState& ps = pit->second;
  const int32_t shared = ps.num_computed / config_.block_size;
  const int32_t fresh = static_cast<int32_t>(ps.blocks.size()) - shared;
  if (fresh > pool_.num_free()) return ForkResult{};
  if (wpool_ && fresh > wpool_->num_free()) return ForkResult{};

  RequestState cs;
  cs.root = ps.root;
  cs.spans = ps.spans;
  cs.caching = ps.caching;
  cs.allocated = true;
  cs.num_tokens = ps.num_tokens;
  cs.num_computed = ps.num_computed;
  cs.num_registered = std::min(ps.num_registered, shared);
  cs.hashes = ps.hashes;  // content hashes of the tokens both share so far
  cs.blocks.reserve(ps.blocks.size());
  for (int32_t i = 0; i < shared; ++i) {
    const int32_t b = ps.blocks[static_cast<size_t>(i)];
    pool_.acquire(b);
    cs.blocks.push_back(b);
  }
  for (int32_t i = 0; i < fresh; ++i) cs.blocks.push_back(pool_.allocate());
  if (wpool_) {  // the same over the window table; entries behind the window stay -1
    cs.wheld_from = ps.wheld_from;
    cs.wblocks.assign(ps.wblocks.size(), -1);
    for (int32_t i = ps.wheld_from; i < shared; ++i) {
      const int32_t b = ps.wblocks[static_cast<size_t>(i)];
      wpool_->acquire(b);
      cs.wblocks[static_cast<size_t>(i)] = b;
    }
    for (size_t i = static_cast<size_t>(shared); i < cs.wblocks.size(); ++i) cs.wblocks[i] = wpool_->allocate();
  }

  ForkResult r;
  r.status = AllocStatus::kOk;
  if (const int32_t partial = ps.num_computed % config_.block_size; partial > 0) {
    r.copy = BlockCopy{ps.blocks[static_cast<size_t>(shared)], cs.blocks[static_cast<size_t>(shared)], partial};
    if (wpool_) {
      r.copy.window_src = ps.wblocks[static_cast<size_t>(shared)];
      r.copy.window_dst = cs.wblocks[static_cast<size_t>(shared)];
    }
  }
  RequestState& inserted = requests_[child];
  inserted = std::move(cs);
  r.block_table = inserted.blocks;
  return r;
}

void KvCacheManager::attach_tiers(KvTierStack* tiers, KvBlockIo io) {
  // Not with a window group: a payload holds one block of the main group's layers only.
  tiers_ = config_.enable_prefix_caching && !wpool_ ? tiers : nullptr;
  io_ = std::move(io);
  if (tiers_ == nullptr) {
    pool_.set_eviction_hook({});
    return;
  }
  payload_.resize(tiers_->block_bytes());
  evicted_.resize(tiers_->block_bytes());
  pool_.set_eviction_hook([this](int32_t block, const BlockHash& hash) { demote(block, hash); });
}

void KvCacheManager::demote(int32_t block, const BlockHash& hash) {
  if (io_.read(block, evicted_)) tiers_->demote(hash, evicted_);
}

int32_t KvCacheManager::promote(const BlockHash& hash) {
  if (pool_.num_free() == 0 || !tiers_->contains(hash)) return -1;
  // Read before drawing a block: the draw may evict (demote) a pool block, and that demotion may
  // push this very entry down a tier.
  if (!tiers_->promote(hash, payload_)) return -1;
  const int32_t b = pool_.allocate();
  if (!io_.write(b, payload_)) {
    pool_.release(b);
    return -1;
  }
  pool_.cache(b, hash);
  pool_.release(b);  // free and cached: at the tail, findable
  ++stats_.tier_hit_blocks;
  return b;
}

int64_t KvCacheManager::persist_to_tiers() {
  if (tiers_ == nullptr) return 0;
  tiers_->flush_to_last();
  int64_t n = 0;
  std::vector<uint8_t> buf(tiers_->block_bytes());
  for (int32_t b : pool_.cached_blocks()) {
    if (!io_.read(b, buf)) continue;
    tiers_->persist(pool_.hash(b), buf);
    ++n;
  }
  return n;
}

void KvCacheManager::reset_prefix_cache() {
  pool_.clear_cache();
  if (wpool_) wpool_->clear_cache();
}

std::optional<BlockHash> KvCacheManager::block_hash(RequestId id, int32_t i) const {
  auto it = requests_.find(id);
  if (it == requests_.end() || i < 0 || static_cast<size_t>(i) >= it->second.hashes.size()) return std::nullopt;
  return it->second.hashes[static_cast<size_t>(i)];
}

std::span<const int32_t> KvCacheManager::window_block_table(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? std::span<const int32_t>{} : std::span<const int32_t>(it->second.wblocks);
}

int32_t KvCacheManager::max_allocatable_tokens(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end()) return 0;
  const RequestState& st = it->second;
  int64_t blocks = static_cast<int64_t>(st.blocks.size()) + pool_.num_free();
  if (wpool_ && st.allocated) {
    blocks = std::min<int64_t>(
        blocks, static_cast<int64_t>(st.wblocks.size()) + wpool_->num_free() + window_releasable(st));
  }
  return static_cast<int32_t>(std::min<int64_t>(blocks * config_.block_size, INT32_MAX));
}

int32_t KvCacheManager::num_held_blocks(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() || !it->second.allocated ? 0 : static_cast<int32_t>(it->second.blocks.size());
}

int32_t KvCacheManager::num_held_window_blocks(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end()) return 0;
  return static_cast<int32_t>(std::count_if(it->second.wblocks.begin(), it->second.wblocks.end(),
                                            [](int32_t b) { return b >= 0; }));
}

std::span<const int32_t> KvCacheManager::block_table(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? std::span<const int32_t>{} : std::span<const int32_t>(it->second.blocks);
}

int32_t KvCacheManager::num_tokens(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? 0 : it->second.num_tokens;
}

int32_t KvCacheManager::num_computed(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? 0 : it->second.num_computed;
}

double KvCacheManager::usage() const {
  const double full = static_cast<double>(pool_.num_blocks() - pool_.num_free()) / pool_.num_blocks();
  if (!wpool_) return full;
  return std::max(full, static_cast<double>(wpool_->num_blocks() - wpool_->num_free()) / wpool_->num_blocks());
}

KvCacheStats KvCacheManager::stats() const {
  KvCacheStats s = stats_;
  s.evictions = pool_.evictions();
  return s;
}

}  // namespace cadenza::kv
