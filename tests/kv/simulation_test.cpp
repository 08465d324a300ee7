// A randomized scheduler driving KvCacheManager the way the engine does (admit with prefix lookup,
// chunked prefill, decode, preemption, abort, fork, cache reset, speculative rollback by trim)
// over a small pool, with a model
// of the KV contents: every slot written records a fingerprint of (extra key, whole token prefix
// up to that position). Every step then checks that
//   - each block is free (ref 0, in the free queue once) or used (ref = number of live tables that
//     hold it), never both; the pool's own invariants hold (links, hash index <-> stored hashes);
//   - tables match the manager's and cover their token counts with exactly the needed blocks;
//   - every position a request attends to holds its own prefix's KV (what a cache hit must give);
//   - a request only ever writes into blocks nobody else holds;
// and at the end, with every request freed, that every block is free again (no leak). Variants:
// a KV tier, a window group (sliding-window layers' own blocks, released behind the window), and
// hybrid models' recurrent-state snapshots (a request always continues from its own prefix's
// state, restored on a prefix hit).
// Seeds: a fixed one, and one from std::random_device (printed on failure; CADENZA_KV_SEED=N
// replays it).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kv/kv_cache_manager.h"
#include "kv/memory_tier.h"

namespace cadenza::kv {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finalizer: the test's own hash, independent of SHA-256
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct SimRequest {
  RequestId id = 0;
  std::string extra;
  std::vector<int32_t> tokens;
  std::vector<uint64_t> fp;  // fp[p]: fingerprint of (extra, tokens[0..p]); never 0
  int32_t target_len = 0;    // finishes once it has this many tokens, all computed
  int32_t computed = 0;
  int32_t allocated = 0;     // tokens the table covers (last successful allocate)
  bool found = false;        // find_cached_prefix called since it last lost its blocks
  std::vector<int32_t> table;
  std::vector<int32_t> wtable;  // window group: the window table (-1 behind the window)
  uint64_t state = 0;  // states: the recurrent state, fp of the last computed position (0: fresh)

  void push(int32_t token) {
    uint64_t prev = fp.empty() ? mix(std::hash<std::string>{}(extra)) : fp.back();
    uint64_t f = mix(prev ^ mix(static_cast<uint64_t>(static_cast<uint32_t>(token))));
    fp.push_back(f == 0 ? 1 : f);
    tokens.push_back(token);
  }
  int32_t len() const { return static_cast<int32_t>(tokens.size()); }
};

class Simulation {
 public:
  static constexpr int32_t kBlockSize = 4;
  static constexpr int32_t kNumBlocks = 48;
  static constexpr int32_t kWindow = 6;         // window group: positions a windowed layer reads
  static constexpr int32_t kWindowBlocks = 20;  // ... and its pool

  // `tiered`: a host-memory KV tier of 24 blocks under the pool (kv_tier_stack.h), whose payload
  // is a block's slot fingerprints, so every promoted block is checked like a computed one.
  // `windowed`: a window group (KvCacheConfig::window) whose slots are modelled and checked like
  // the main pool's, for the positions a windowed layer reads.
  // `states`: a hybrid model's recurrent state per request (the fingerprint of its last computed
  // position), snapshotted at block boundaries into a MemoryTier of 6 entries keyed by block hash
  // (the engine's state_snapshots_) and restored on a prefix hit; the manager finds only prefixes
  // with a snapshot (set_prefix_usable). Checks that a request always continues from its own
  // prefix's state. No speculative rollbacks (hybrid models refuse them).
  Simulation(uint64_t seed, bool caching, bool tiered = false, bool windowed = false, bool states = false)
      : rng_(seed),
        mgr_(KvCacheConfig{kNumBlocks, kBlockSize, caching, windowed ? kWindow : 0,
                           windowed ? kWindowBlocks : 0}),
        slots_(static_cast<size_t>(kNumBlocks) * kBlockSize, 0),
        wslots_(static_cast<size_t>(kWindowBlocks) * kBlockSize, 0),
        windowed_(windowed) {
    if (states) {
      snapshots_ = std::make_unique<MemoryTier>(6 * sizeof(uint64_t));
      mgr_.set_prefix_usable([this](const BlockHash& h) { return snapshots_->contains(h); });
    }
    if (tiered) {
      constexpr size_t kPayload = kBlockSize * sizeof(uint64_t);
      std::vector<std::unique_ptr<KvTier>> tiers;
      tiers.push_back(std::make_unique<MemoryTier>(24 * kPayload));
      tiers_ = std::make_unique<KvTierStack>(kPayload, std::move(tiers));
      mgr_.attach_tiers(tiers_.get(),
                        {[this](int32_t b, std::span<uint8_t> out) {
                           std::memcpy(out.data(), &slot(b, 0), out.size());
                           return true;
                         },
                         [this](int32_t b, std::span<const uint8_t> in) {
                           std::memcpy(&slot(b, 0), in.data(), in.size());
                           return true;
                         }});
    }
    // A few shared prefixes (some not block-aligned) so that lookups hit.
    for (int32_t len : {0, 6, 13, 24, 37}) {
      std::vector<int32_t> p;
      for (int32_t i = 0; i < len; ++i) p.push_back(uniform(0, 999));
      prefixes_.push_back(p);
    }
  }

  std::string failure;
  int64_t forks = 0, stale = 0, preemptions = 0, copies = 0;
  int64_t rollbacks = 0, rollback_copies = 0, rollback_no_room = 0, rollback_behind_window = 0;
  int64_t window_copies = 0, restores = 0, snapshots = 0;
  const KvCacheManager& mgr() const { return mgr_; }

  void step() {
    const int32_t r = uniform(0, 999);
    if (r < 220) admit();
    else if (r < 270) abort_one();
    else if (r < 310) fork_one();
    else if (r < 313) mgr_.reset_prefix_cache();
    else if (r < 373) rollback_one();
    else engine_step();
    if (failure.empty()) check_invariants();
  }

  void finish_all() {
    for (auto& q : {&running_, &waiting_}) {
      for (SimRequest& s : *q) mgr_.free(s.id);
      q->clear();
    }
    if (mgr_.num_free_blocks() != kNumBlocks) fail("leak: {} of {} blocks free", mgr_.num_free_blocks(), kNumBlocks);
    if (windowed_ && mgr_.num_free_window_blocks() != kWindowBlocks) {
      fail("leak: {} of {} window blocks free", mgr_.num_free_window_blocks(), kWindowBlocks);
    }
    for (int32_t b = 0; b < kNumBlocks; ++b) {
      if (mgr_.pool().ref_count(b) != 0) fail("leak: block {} has ref_count {}", b, mgr_.pool().ref_count(b));
    }
    if (Status st = mgr_.pool().check_invariants(); !st) fail("pool: {}", st.error());
  }

 private:
  template <typename... Args>
  void fail(fmt::format_string<Args...> f, Args&&... args) {
    if (failure.empty()) failure = fmt::format(f, std::forward<Args>(args)...);
  }
  int32_t uniform(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng_); }
  uint64_t& slot(int32_t block, int32_t offset) {
    return slots_[static_cast<size_t>(block) * kBlockSize + static_cast<size_t>(offset)];
  }
  uint64_t& wslot(int32_t block, int32_t offset) {
    return wslots_[static_cast<size_t>(block) * kBlockSize + static_cast<size_t>(offset)];
  }
  // The first block a step starting at `pos` reads in a windowed layer.
  static int32_t window_first(int32_t pos) { return std::max(0, pos - kWindow + 1) / kBlockSize; }
  // The window copy of a fork or trim: checked against the expected blocks, then performed.
  void window_copy(const BlockCopy& c, int32_t src, int32_t dst, int32_t num_tokens, const char* what) {
    if (!windowed_) {
      if (c.window_src != -1 || c.window_dst != -1) fail("{}: a window copy without a window group", what);
      return;
    }
    if (num_tokens == 0) return;
    if (c.window_src != src || c.window_dst != dst || c.num_tokens != num_tokens) {
      return fail("{}: window copy {}->{} of {}, expected {}->{} of {}", what, c.window_src, c.window_dst,
                  c.num_tokens, src, dst, num_tokens);
    }
    ++window_copies;
    for (int32_t o = 0; o < num_tokens; ++o) wslot(dst, o) = wslot(src, o);
  }

  void admit() {
    if (running_.size() + waiting_.size() >= 12) return;
    SimRequest s;
    s.id = next_id_++;
    s.extra = uniform(0, 3) == 0 ? "adapter-a" : "";
    for (int32_t t : prefixes_[static_cast<size_t>(uniform(0, static_cast<int32_t>(prefixes_.size()) - 1))]) s.push(t);
    for (int32_t i = uniform(1, 10); i > 0; --i) s.push(uniform(0, 999));
    s.target_len = s.len() + uniform(0, 20);
    waiting_.push_back(std::move(s));
  }

  void abort_one() {
    const size_t total = running_.size() + waiting_.size();
    if (total == 0) return;
    auto i = static_cast<size_t>(uniform(0, static_cast<int32_t>(total) - 1));
    auto& q = i < running_.size() ? running_ : waiting_;
    if (&q == &waiting_) i -= running_.size();
    mgr_.free(q[i].id);
    q.erase(q.begin() + static_cast<std::ptrdiff_t>(i));
  }

  void fork_one() {
    if (running_.empty() || running_.size() + waiting_.size() >= 14) return;
    SimRequest& parent = running_[static_cast<size_t>(uniform(0, static_cast<int32_t>(running_.size()) - 1))];
    const RequestId child_id = next_id_++;
    const int32_t free_before = mgr_.num_free_blocks();
    ForkResult f = mgr_.fork(parent.id, child_id);
    if (!f) {
      if (mgr_.contains(child_id) || mgr_.num_free_blocks() != free_before) fail("failed fork changed state");
      return;
    }
    ++forks;
    SimRequest child = parent;
    child.id = child_id;
    child.table.assign(f.block_table.begin(), f.block_table.end());
    const std::span<const int32_t> cw = mgr_.window_block_table(child_id);
    child.wtable.assign(cw.begin(), cw.end());
    const int32_t shared = parent.computed / kBlockSize;
    for (size_t i = 0; i < child.table.size(); ++i) {
      const bool same = child.table[i] == parent.table[i];
      if (same != (static_cast<int32_t>(i) < shared)) fail("fork: block {} shared={} but {} full blocks", i, same, shared);
    }
    if (f.copy.num_tokens != parent.computed % kBlockSize) fail("fork: copy of {} tokens", f.copy.num_tokens);
    if (f.copy.num_tokens > 0) {
      ++copies;
      if (f.copy.src != parent.table[static_cast<size_t>(shared)] || f.copy.dst != child.table[static_cast<size_t>(shared)]) {
        fail("fork: copy {}->{} is not the partial block", f.copy.src, f.copy.dst);
      }
      for (int32_t o = 0; o < f.copy.num_tokens; ++o) slot(f.copy.dst, o) = slot(f.copy.src, o);  // the engine's copy
    }
    if (windowed_ && f.copy.num_tokens > 0) {
      window_copy(f.copy, parent.wtable[static_cast<size_t>(shared)], child.wtable[static_cast<size_t>(shared)],
                  f.copy.num_tokens, "fork");
    } else {
      window_copy(f.copy, -1, -1, 0, "fork");
    }
    running_.push_back(std::move(child));
  }

  // Speculative decoding's rollback: a running request keeps its first n positions, where n is
  // mostly past the computed ones (rejected drafts) and sometimes anywhere (cuts into computed,
  // possibly shared, blocks). Its tokens from n on are replaced by one new token, as the
  // verification's corrected token would be.
  void rollback_one() {
    if (snapshots_) return;  // hybrid models: no speculative decoding
    if (uniform(0, 9) == 0) {  // bad input: unknown ids and requests with no blocks yet
      if (mgr_.trim(next_id_ + 100, 0).ok()) fail("trim of an unknown request succeeded");
      for (const SimRequest& w : waiting_) {
        if (mgr_.contains(w.id) && mgr_.trim(w.id, 0).ok()) fail("trim of pending request {} succeeded", w.id);
      }
    }
    if (running_.empty()) return;
    SimRequest& s = running_[static_cast<size_t>(uniform(0, static_cast<int32_t>(running_.size()) - 1))];
    int32_t n = uniform(0, 1) == 0 ? uniform(s.computed, s.allocated) : uniform(0, s.allocated);
    // With a window group most cuts far back are refused (behind the window): also cut within
    // the window, where a block shared by a fork makes the copy case.
    if (windowed_ && uniform(0, 1) == 0) n = uniform(std::max(0, s.computed - kWindow + 1), s.computed);
    const std::vector<int32_t> old_table = s.table;
    const int32_t keep = (n + kBlockSize - 1) / kBlockSize;
    const bool cut_shared = n % kBlockSize != 0 && mgr_.pool().ref_count(old_table[static_cast<size_t>(keep - 1)]) > 1;
    const int32_t free_before = mgr_.num_free_blocks();
    const std::vector<int32_t> old_wtable = s.wtable;
    int32_t held_from = 0;
    while (held_from < static_cast<int32_t>(s.wtable.size()) && s.wtable[static_cast<size_t>(held_from)] < 0) ++held_from;
    const bool behind = windowed_ && window_first(std::min(s.computed, n)) < held_from;
    const bool wcut_shared = windowed_ && !behind && n % kBlockSize != 0 &&
                             mgr_.window_pool()->ref_count(old_wtable[static_cast<size_t>(keep - 1)]) > 1;
    Result<TrimResult> r = mgr_.trim(s.id, n);
    if (behind) {  // its window's blocks are gone: an error, and nothing changed
      if (r.ok()) return fail("trim({}, {}) behind the window (held from block {}) succeeded", s.id, n, held_from);
      ++rollback_behind_window;
      if (mgr_.num_tokens(s.id) != s.allocated) fail("failed trim changed state");
      return;
    }
    if (!r) return fail("trim({}, {}) of {} tokens: {}", s.id, n, s.allocated, r.error());
    if (!*r) {
      ++rollback_no_room;
      if (!cut_shared && !wcut_shared) fail("trim said no room without a shared cut block");
      if (mgr_.num_free_blocks() != free_before || mgr_.num_tokens(s.id) != s.allocated) fail("failed trim changed state");
      return;
    }
    ++rollbacks;
    s.table.assign(r->block_table.begin(), r->block_table.end());
    if (static_cast<int32_t>(s.table.size()) != keep || r->num_released_blocks != static_cast<int32_t>(old_table.size()) - keep) {
      return fail("trim to {}: {} blocks kept, {} released, of {}", n, s.table.size(), r->num_released_blocks, old_table.size());
    }
    for (int32_t i = 0; i < keep; ++i) {
      const bool replaced = cut_shared && i == keep - 1;
      if ((s.table[static_cast<size_t>(i)] != old_table[static_cast<size_t>(i)]) != replaced) {
        return fail("trim to {}: block {} replaced={} but shared cut={}", n, i, !replaced, cut_shared);
      }
    }
    if (cut_shared) {
      ++rollback_copies;
      const BlockCopy& c = r->copy;
      if (c.src != old_table[static_cast<size_t>(keep - 1)] || c.dst != s.table.back() || c.num_tokens != n % kBlockSize) {
        return fail("trim to {}: copy {}->{} of {}", n, c.src, c.dst, c.num_tokens);
      }
      for (int32_t o = 0; o < c.num_tokens; ++o) slot(c.dst, o) = slot(c.src, o);  // the engine's copy
    } else if (r->copy.src >= 0) {
      return fail("trim to {}: a copy without a shared cut block", n);
    }
    const std::span<const int32_t> nw = mgr_.window_block_table(s.id);
    s.wtable.assign(nw.begin(), nw.end());
    if (wcut_shared) {
      window_copy(r->copy, old_wtable[static_cast<size_t>(keep - 1)], s.wtable.back(), n % kBlockSize, "trim");
    } else {
      window_copy(r->copy, -1, -1, 0, "trim");
      if (windowed_ && r->copy.window_src != -1) return fail("trim to {}: a window copy without a shared cut", n);
    }
    s.allocated = n;
    s.computed = std::min(s.computed, n);
    s.tokens.resize(static_cast<size_t>(n));
    s.fp.resize(static_cast<size_t>(n));
    s.push(uniform(0, 999));
  }

  // Allocates and "computes" the next chunk of `s`. Returns false on kNoRoom.
  bool run_chunk(SimRequest& s) {
    const int32_t n = std::min(uniform(1, 8), s.len() - s.computed);
    const int32_t total = s.computed + n;
    const bool predicted = mgr_.can_allocate(s.id, total - mgr_.num_tokens(s.id));
    const int32_t free_before = mgr_.num_free_blocks();
    Allocation a = mgr_.allocate(s.id, total);
    if (a.status == AllocStatus::kStalePrefix) {
      if (predicted) fail("can_allocate said yes, allocate said stale");
      if (!s.table.empty()) fail("request {} holds blocks but allocate said stale", s.id);
      ++stale;
      s.found = false;  // the scheduler looks again next time
      return true;
    }
    if (predicted != static_cast<bool>(a)) fail("can_allocate {} but allocate {}", predicted, static_cast<int>(a.status));
    if (!a) {
      if (mgr_.num_free_blocks() != free_before) fail("failed allocate changed the free count");
      if (!std::equal(s.table.begin(), s.table.end(), mgr_.block_table(s.id).begin(), mgr_.block_table(s.id).end())) {
        fail("failed allocate changed the table");
      }
      return false;
    }
    s.table.assign(a.block_table.begin(), a.block_table.end());
    const std::span<const int32_t> wt = mgr_.window_block_table(s.id);
    s.wtable.assign(wt.begin(), wt.end());
    s.allocated = std::max(s.allocated, total);
    if (windowed_) {
      // Windowed layers read positions from the window of the chunk's first token on (the
      // blocks behind it are released: -1) and write the chunk, into blocks held alone.
      const int32_t first = window_first(s.computed);
      if (s.wtable.size() != s.table.size()) fail("request {}: window table of {} for {}", s.id, s.wtable.size(), s.table.size());
      for (int32_t i = 0; i < static_cast<int32_t>(s.wtable.size()); ++i) {
        const bool held = s.wtable[static_cast<size_t>(i)] >= 0;
        if (held != (i >= first)) return fail("request {}: window block {} held={} (window from block {})", s.id, i, held, first), true;
      }
      for (int32_t p = std::max(0, s.computed - kWindow + 1); p < s.computed; ++p) {
        const int32_t b = s.wtable[static_cast<size_t>(p / kBlockSize)];
        if (wslot(b, p % kBlockSize) != s.fp[static_cast<size_t>(p)]) {
          return fail("request {} position {} (window block {}) holds foreign or missing KV", s.id, p, b), true;
        }
      }
      for (int32_t p = s.computed; p < total; ++p) {
        const int32_t b = s.wtable[static_cast<size_t>(p / kBlockSize)];
        if (mgr_.window_pool()->ref_count(b) != 1) fail("request {} writes into window block {} with ref_count {}", s.id, b, mgr_.window_pool()->ref_count(b));
        wslot(b, p % kBlockSize) = s.fp[static_cast<size_t>(p)];
      }
    }
    // Attention reads: every earlier position must hold this request's own prefix.
    for (int32_t p = 0; p < s.computed; ++p) {
      const int32_t b = s.table[static_cast<size_t>(p / kBlockSize)];
      if (slot(b, p % kBlockSize) != s.fp[static_cast<size_t>(p)]) {
        fail("request {} position {} (block {}) holds foreign or missing KV", s.id, p, b);
        return true;
      }
    }
    // KV writes: only into blocks this request holds alone.
    for (int32_t p = s.computed; p < total; ++p) {
      const int32_t b = s.table[static_cast<size_t>(p / kBlockSize)];
      if (mgr_.pool().ref_count(b) != 1) fail("request {} writes into block {} with ref_count {}", s.id, b, mgr_.pool().ref_count(b));
      slot(b, p % kBlockSize) = s.fp[static_cast<size_t>(p)];
    }
    if (snapshots_) {  // the state continues from exactly this request's prefix
      const uint64_t want = s.computed == 0 ? 0 : s.fp[static_cast<size_t>(s.computed - 1)];
      if (s.state != want) fail("request {} at {}: its state is not its prefix's", s.id, s.computed);
      s.state = s.fp[static_cast<size_t>(total - 1)];
    }
    s.computed = total;
    mgr_.mark_computed(s.id, s.computed, s.tokens);
    if (snapshots_ && total % kBlockSize == 0) {  // the engine snapshots at block boundaries
      const std::optional<BlockHash> h = mgr_.block_hash(s.id, total / kBlockSize - 1);
      if (h && !snapshots_->contains(*h)) {
        ++snapshots;
        snapshots_->put(*h, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&s.state), 8));
      }
    }
    if (s.computed == s.len() && s.len() < s.target_len) s.push(uniform(0, 999));  // sample
    return true;
  }

  void engine_step() {
    // Running requests first, preempting the newest (recompute) when out of blocks.
    for (size_t i = 0; i < running_.size() && failure.empty();) {
      SimRequest& s = running_[i];
      if (!run_chunk(s)) {
        SimRequest victim = std::move(running_.back());
        running_.pop_back();
        mgr_.free(victim.id);
        victim.computed = victim.allocated = 0;
        victim.found = false;
        victim.table.clear();
        victim.wtable.clear();
        victim.state = 0;  // its slot is given back
        waiting_.push_front(std::move(victim));
        ++preemptions;
        continue;  // retry `i` (or stop if it was the victim)
      }
      if (s.computed == s.len() && s.len() >= s.target_len) {
        mgr_.free(s.id);
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      ++i;
    }
    // Then admit waiting requests in order until one does not fit.
    while (!waiting_.empty() && failure.empty()) {
      SimRequest& s = waiting_.front();
      if (!s.found) {
        const int32_t cached = mgr_.find_cached_prefix(s.id, s.tokens, s.extra);
        if (cached % kBlockSize != 0 || cached >= s.len() || cached < 0) fail("find returned {} for {} tokens", cached, s.len());
        s.computed = cached;
        s.state = 0;
        if (snapshots_ && cached > 0) {  // restore the prefix's snapshot (its value is immutable)
          const std::optional<BlockHash> h = mgr_.block_hash(s.id, cached / kBlockSize - 1);
          uint64_t v = 0;
          if (!h || !snapshots_->get(*h, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&v), 8))) {
            fail("request {}: find returned {} without a snapshot", s.id, cached);
          }
          s.state = v;
          ++restores;
        }
        s.found = true;
      }
      if (!run_chunk(s)) break;
      if (!s.found) continue;  // stale: look again
      running_.push_back(std::move(s));
      waiting_.pop_front();
    }
  }

  void check_invariants() {
    const BlockPool& pool = mgr_.pool();
    if (Status st = pool.check_invariants(); !st) return fail("pool: {}", st.error());
    std::vector<int32_t> refs(kNumBlocks, 0);
    for (const SimRequest& s : running_) {
      std::span<const int32_t> t = mgr_.block_table(s.id);
      if (!std::equal(t.begin(), t.end(), s.table.begin(), s.table.end())) return fail("request {}: table differs", s.id);
      const auto needed = static_cast<size_t>((s.allocated + kBlockSize - 1) / kBlockSize);
      if (s.table.size() != needed) return fail("request {}: {} blocks for {} tokens", s.id, s.table.size(), s.allocated);
      if (mgr_.num_tokens(s.id) != s.allocated || mgr_.num_computed(s.id) != s.computed) {
        return fail("request {}: counts {} / {}, expected {} / {}", s.id, mgr_.num_tokens(s.id), mgr_.num_computed(s.id), s.allocated, s.computed);
      }
      std::vector<int32_t> sorted = s.table;
      std::sort(sorted.begin(), sorted.end());
      if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return fail("request {}: a block twice", s.id);
      for (int32_t b : s.table) ++refs[static_cast<size_t>(b)];
    }
    for (const SimRequest& s : waiting_) {
      if (!mgr_.block_table(s.id).empty()) return fail("waiting request {} holds blocks", s.id);
    }
    std::vector<int32_t> queue = pool.free_queue();
    std::vector<int32_t> in_queue(kNumBlocks, 0);
    for (int32_t b : queue) ++in_queue[static_cast<size_t>(b)];
    int32_t used = 0;
    for (int32_t b = 0; b < kNumBlocks; ++b) {
      const auto i = static_cast<size_t>(b);
      if (pool.ref_count(b) != refs[i]) return fail("block {}: ref_count {}, {} tables hold it", b, pool.ref_count(b), refs[i]);
      if (in_queue[i] != (refs[i] == 0 ? 1 : 0)) return fail("block {}: ref {} but {} times in the free queue", b, refs[i], in_queue[i]);
      if (refs[i] > 0) ++used;
      if (pool.is_cached(b)) {
        for (int32_t o = 0; o < kBlockSize; ++o) {
          if (slot(b, o) == 0) return fail("cached block {} has an unwritten slot {}", b, o);
        }
      }
    }
    if (mgr_.num_free_blocks() != kNumBlocks - used) return fail("num_free {} but {} used", mgr_.num_free_blocks(), used);
    double usage = static_cast<double>(used) / kNumBlocks;
    if (windowed_) {  // the same over the window pool
      const BlockPool& wpool = *mgr_.window_pool();
      if (Status st = wpool.check_invariants(); !st) return fail("window pool: {}", st.error());
      std::vector<int32_t> wrefs(kWindowBlocks, 0);
      for (const SimRequest& s : running_) {
        std::span<const int32_t> t = mgr_.window_block_table(s.id);
        if (!std::equal(t.begin(), t.end(), s.wtable.begin(), s.wtable.end())) return fail("request {}: window table differs", s.id);
        for (int32_t b : s.wtable)
          if (b >= 0) ++wrefs[static_cast<size_t>(b)];
      }
      std::vector<int32_t> win_queue(kWindowBlocks, 0);
      for (int32_t b : wpool.free_queue()) ++win_queue[static_cast<size_t>(b)];
      int32_t wused = 0;
      for (int32_t b = 0; b < kWindowBlocks; ++b) {
        const auto i = static_cast<size_t>(b);
        if (wpool.ref_count(b) != wrefs[i]) return fail("window block {}: ref_count {}, {} tables hold it", b, wpool.ref_count(b), wrefs[i]);
        if (win_queue[i] != (wrefs[i] == 0 ? 1 : 0)) return fail("window block {}: ref {} but {} times queued", b, wrefs[i], win_queue[i]);
        if (wrefs[i] > 0) ++wused;
        if (wpool.is_cached(b))
          for (int32_t o = 0; o < kBlockSize; ++o)
            if (wslot(b, o) == 0) return fail("cached window block {} has an unwritten slot {}", b, o);
      }
      usage = std::max(usage, static_cast<double>(wused) / kWindowBlocks);
    }
    if (mgr_.usage() != usage) return fail("usage {} for {} used", mgr_.usage(), used);
  }

  std::mt19937_64 rng_;
  std::unique_ptr<KvTierStack> tiers_;  // declared before mgr_, which borrows it
  KvCacheManager mgr_;
  std::vector<uint64_t> slots_;  // fingerprint written in each KV slot; 0 = never written
  std::vector<uint64_t> wslots_;  // the same for the window group's slots
  bool windowed_ = false;
  std::unique_ptr<MemoryTier> snapshots_;  // states: the snapshot store, or null
  std::vector<std::vector<int32_t>> prefixes_;
  std::deque<SimRequest> running_, waiting_;
  RequestId next_id_ = 1;
};

void run_simulation(uint64_t seed, int steps, bool caching = true, bool tiered = false,
                    bool windowed = false, bool states = false) {
  SCOPED_TRACE(fmt::format("seed {} (replay: CADENZA_KV_SEED={})", seed, seed));
  Simulation sim(seed, caching, tiered, windowed, states);
  for (int step = 0; step < steps; ++step) {
    sim.step();
    ASSERT_EQ(sim.failure, "") << "step " << step;
  }
  const KvCacheStats st = sim.mgr().stats();
  sim.finish_all();
  ASSERT_EQ(sim.failure, "") << "after freeing everything";
  EXPECT_GT(sim.preemptions, 0);
  EXPECT_GT(sim.forks, 0);
  if (!states) {
    EXPECT_GT(sim.rollbacks, 0);
    EXPECT_GT(sim.rollback_copies, 0);
  } else {
    EXPECT_GT(sim.restores, 0);
    EXPECT_GT(sim.snapshots, 0);
  }
  if (!caching) {
    EXPECT_EQ(st.hits, 0);
    EXPECT_EQ(st.evictions, 0);
    EXPECT_EQ(sim.mgr().pool().num_cached(), 0);
    return;
  }
  // The workload is built to exercise these paths; a seed that misses them tests little.
  EXPECT_GT(st.hits, 0);
  EXPECT_GT(st.hit_tokens, 0);
  EXPECT_LE(st.hit_tokens, st.query_tokens);
  EXPECT_GT(st.evictions, 0);
  if (tiered) {
    EXPECT_GT(st.tier_hit_blocks, 0);
  }
  if (windowed) {
    EXPECT_GT(sim.window_copies, 0);
    EXPECT_GT(sim.rollback_behind_window, 0);
  }
}

TEST(KvSimulation, FixedSeed) { run_simulation(20240611, 10000); }

uint64_t random_seed() {
  if (const char* env = std::getenv("CADENZA_KV_SEED")) return std::strtoull(env, nullptr, 10);
  return (static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
}

TEST(KvSimulation, RandomSeed) { run_simulation(random_seed(), 10000); }

TEST(KvSimulation, RandomSeedWithMemoryTier) {
  run_simulation(random_seed(), 10000, /*caching=*/true, /*tiered=*/true);
}

TEST(KvSimulation, RandomSeedCachingOff) { run_simulation(random_seed(), 10000, /*caching=*/false); }

TEST(KvSimulation, FixedSeedWindowGroup) {
  run_simulation(20240611, 20000, /*caching=*/true, /*tiered=*/false, /*windowed=*/true);
}

TEST(KvSimulation, RandomSeedWindowGroup) {
  run_simulation(random_seed(), 20000, /*caching=*/true, /*tiered=*/false, /*windowed=*/true);
}

TEST(KvSimulation, FixedSeedStateSnapshots) {
  run_simulation(20240611, 10000, /*caching=*/true, /*tiered=*/false, /*windowed=*/false, /*states=*/true);
}

TEST(KvSimulation, RandomSeedStateSnapshots) {
  run_simulation(random_seed(), 10000, /*caching=*/true, /*tiered=*/false, /*windowed=*/false, /*states=*/true);
}

TEST(KvSimulation, RandomSeedWindowGroupCachingOff) {
  run_simulation(random_seed(), 20000, /*caching=*/false, /*tiered=*/false, /*windowed=*/true);
}

}  // namespace
}  // namespace cadenza::kv
