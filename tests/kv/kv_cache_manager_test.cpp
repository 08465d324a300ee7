#include "kv/kv_cache_manager.h"

#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace cadenza::kv {
namespace {

std::vector<int32_t> random_tokens(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, 151000);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = d(rng);
  return v;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<int32_t> vec(std::span<const int32_t> s) { return {s.begin(), s.end()}; }

void expect_ok(const KvCacheManager& m) {
  Status st = m.pool().check_invariants();
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error());
}

// Admits `tokens` as the scheduler would (lookup, allocate the rest, compute it all). Returns the
// cached token count.
int32_t run_prompt(KvCacheManager& m, RequestId id, const std::vector<int32_t>& tokens,
                   std::string_view extra = {}) {
  const int32_t cached = m.find_cached_prefix(id, tokens, extra);
  const auto n = static_cast<int32_t>(tokens.size());
  EXPECT_TRUE(m.allocate(id, n));
  m.mark_computed(id, n, tokens);
  return cached;
}

TEST(KvCacheManager, SecondRequestWithSameThousandTokenPrefixHits992) {
  KvCacheManager m({.num_blocks = 256, .block_size = 16});
  const auto prefix = random_tokens(1000, 1);
  EXPECT_EQ(run_prompt(m, 1, prefix), 0);
  EXPECT_EQ(m.pool().num_cached(), 62);  // 62 full blocks; the 63rd holds 8 tokens
  // Same prompt: 62 full blocks = 992 tokens (all the full blocks there are).
  EXPECT_EQ(run_prompt(m, 2, prefix), 992);
  const std::span<const int32_t> t1 = m.block_table(1), t2 = m.block_table(2);
  ASSERT_EQ(t2.size(), 63u);
  for (size_t i = 0; i < 62; ++i) {
    EXPECT_EQ(t1[i], t2[i]);
    EXPECT_EQ(m.pool().ref_count(t1[i]), 2);
  }
  EXPECT_NE(t1[62], t2[62]);  // the partial block is private
  // Same prefix, different continuation: the same 62 blocks.
  EXPECT_EQ(m.find_cached_prefix(3, concat(prefix, random_tokens(24, 2))), 992);
  const KvCacheStats s = m.stats();
  EXPECT_EQ(s.queries, 3);
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.query_tokens, 3024);
  EXPECT_EQ(s.hit_tokens, 1984);
  EXPECT_EQ(s.evictions, 0);
  m.free(1);
  m.free(2);
  m.free(3);
  EXPECT_EQ(m.num_free_blocks(), 256);
  expect_ok(m);
}

TEST(KvCacheManager, WindowGroupReleasesBlocksBehindTheWindow) {
  // Window 40 positions, blocks of 16: a step from position p reads window blocks from
  // (p - 39) / 16 on.
  KvCacheManager m({.num_blocks = 64, .block_size = 16, .window = 40, .num_window_blocks = 8});
  ASSERT_TRUE(m.has_window_group());
  const auto tokens = random_tokens(200, 3);
  m.find_cached_prefix(1, tokens);
  ASSERT_TRUE(m.allocate(1, 64));  // chunk [0, 64): 4 blocks in each group
  EXPECT_EQ(m.num_held_window_blocks(1), 4);
  m.mark_computed(1, 64, tokens);
  // Next chunk [64, 128): positions from 25 on are read, so window block 0 goes first.
  ASSERT_TRUE(m.allocate(1, 128));
  EXPECT_EQ(vec(m.window_block_table(1)).size(), 8u);
  EXPECT_EQ(m.window_block_table(1)[0], -1);
  EXPECT_GE(m.window_block_table(1)[1], 0);
  EXPECT_EQ(m.num_held_blocks(1), 8);
  EXPECT_EQ(m.num_held_window_blocks(1), 7);
  m.mark_computed(1, 128, tokens);
  // 8 window blocks in all: one more step of 64 fits only because the request releases its own
  // blocks 1..4 (positions < 89) first; max_allocatable_tokens counts them.
  EXPECT_EQ(m.num_free_window_blocks(), 1);
  EXPECT_EQ(m.max_allocatable_tokens(1), (8 + 1 + 4) * 16);
  ASSERT_TRUE(m.allocate(1, 192));
  EXPECT_EQ(m.num_held_window_blocks(1), 7);  // blocks 5..11
  m.mark_computed(1, 192, tokens);
  // A rollback behind the released blocks is refused; within the window it works.
  EXPECT_FALSE(m.trim(1, 60).ok());
  ASSERT_TRUE(m.trim(1, 190).ok());

  // Prefix hits: the main pool holds blocks 0..10 of this prompt, the window pool only the
  // newest ones. A request with the same first 176 tokens (11 blocks) can use a prefix of k
  // blocks only if window blocks (16k - 39) / 16 .. k - 1 are there: k = 11 needs 8..10.
  m.free(1);
  EXPECT_EQ(m.find_cached_prefix(2, concat({tokens.begin(), tokens.begin() + 176}, random_tokens(9, 4))), 176);
  ASSERT_TRUE(m.allocate(2, 185));
  EXPECT_EQ(m.window_block_table(2)[7], -1);
  EXPECT_GE(m.window_block_table(2)[8], 0);
  m.free(2);
  // Evict the window pool's cached blocks with other content: no prefix of it is usable any more.
  const auto other = random_tokens(128, 5);
  m.find_cached_prefix(3, other);
  ASSERT_TRUE(m.allocate(3, 128));
  m.mark_computed(3, 128, other);
  m.free(3);
  EXPECT_EQ(m.find_cached_prefix(4, tokens), 0);
  EXPECT_EQ(m.num_free_blocks(), 64);
  EXPECT_EQ(m.num_free_window_blocks(), 8);
  expect_ok(m);
}

TEST(KvCacheManager, PrefixUsableLimitsHitsToSnapshottedPrefixes) {
  KvCacheManager m({.num_blocks = 64, .block_size = 16});
  const auto tokens = random_tokens(100, 6);
  EXPECT_EQ(run_prompt(m, 1, tokens), 0);
  // Only the prefix of 3 blocks has a "snapshot".
  const std::optional<BlockHash> h3 = m.block_hash(1, 2);
  ASSERT_TRUE(h3.has_value());
  EXPECT_FALSE(m.block_hash(1, 6).has_value());  // 100 tokens: 6 full blocks (0..5)
  bool snapshot = true;
  m.set_prefix_usable([&](const BlockHash& h) { return snapshot && h == *h3; });
  EXPECT_EQ(m.find_cached_prefix(2, tokens), 48);
  snapshot = false;  // the snapshot goes before the first allocate: stale
  EXPECT_EQ(m.allocate(2, 60).status, AllocStatus::kStalePrefix);
  EXPECT_EQ(m.find_cached_prefix(2, tokens), 0);
  EXPECT_TRUE(m.allocate(2, 60));
  m.free(1);
  m.free(2);
  expect_ok(m);
}

// Data-driven: request A computes `computed` tokens; B asks with the first `query` of the same
// tokens. The answer is the full cached blocks, capped so that B's last token is computed.
TEST(KvCacheManager, CachedPrefixTable) {
  struct Case {
    int32_t computed, query, expected;
  } cases[] = {
      {1000, 1000, 992}, {1008, 1008, 992}, {1008, 1009, 1008}, {1008, 2000, 1008},
      {16, 16, 0},       {16, 17, 16},      {15, 100, 0},       {32, 1, 0},
      {32, 0, 0},        {100, 50, 48},     {100, 49, 48},      {100, 48, 32},
  };
  const auto tokens = random_tokens(2000, 3);
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "computed " << c.computed << " query " << c.query);
    KvCacheManager m({.num_blocks = 256, .block_size = 16});
    run_prompt(m, 1, {tokens.begin(), tokens.begin() + c.computed});
    m.free(1);  // cached blocks stay findable after their request ends
    EXPECT_EQ(m.find_cached_prefix(2, std::span(tokens).first(static_cast<size_t>(c.query))), c.expected);
    EXPECT_EQ(m.num_tokens(2), c.expected);
    EXPECT_EQ(m.stats().hits, c.expected > 0 ? 1 : 0);
  }
}

TEST(KvCacheManager, EvictsLeastRecentlyFreedAndTailBlocksFirst) {
  KvCacheManager m({.num_blocks = 8, .block_size = 4});
  const auto a = random_tokens(16, 10), b = random_tokens(8, 11);
  run_prompt(m, 1, a);                                     // blocks 0 1 2 3, all full and cached
  EXPECT_EQ(vec(m.block_table(1)), (std::vector<int32_t>{0, 1, 2, 3}));
  m.free(1);
  run_prompt(m, 2, b);                                     // blocks 4 5
  m.free(2);
  EXPECT_EQ(m.pool().free_queue(), (std::vector<int32_t>{6, 7, 3, 2, 1, 0, 5, 4}));
  EXPECT_EQ(m.pool().num_cached(), 6);

  // Three uncached blocks: the never-used ones, then A's tail block.
  ASSERT_TRUE(m.allocate(3, 12));
  EXPECT_EQ(vec(m.block_table(3)), (std::vector<int32_t>{6, 7, 3}));
  EXPECT_EQ(m.stats().evictions, 1);
  EXPECT_EQ(m.find_cached_prefix(4, concat(a, {1})), 12);  // A's first three blocks survive
  EXPECT_EQ(m.find_cached_prefix(5, concat(b, {1})), 8);
  m.free(4);
  m.free(5);

  // Three more: A's remaining blocks go before B's (A was freed earlier).
  ASSERT_TRUE(m.allocate(3, 24));
  EXPECT_EQ(vec(m.block_table(3)), (std::vector<int32_t>{6, 7, 3, 2, 1, 0}));
  EXPECT_EQ(m.stats().evictions, 4);
  EXPECT_EQ(m.find_cached_prefix(4, concat(a, {1})), 0);
  EXPECT_EQ(m.find_cached_prefix(5, concat(b, {1})), 8);
  m.free(4);
  m.free(5);
  m.free(3);  // uncached blocks go to the head: the next allocation reuses them, evicting nothing
  ASSERT_TRUE(m.allocate(6, 4));
  EXPECT_EQ(vec(m.block_table(6)), (std::vector<int32_t>{6}));
  EXPECT_EQ(m.stats().evictions, 4);
  expect_ok(m);
}

TEST(KvCacheManager, CachingOffNeverHits) {
  KvCacheManager m({.num_blocks = 64, .block_size = 16, .enable_prefix_caching = false});
  const auto p = random_tokens(300, 4);
  EXPECT_EQ(run_prompt(m, 1, p), 0);
  EXPECT_EQ(run_prompt(m, 2, p), 0);
  m.free(1);
  EXPECT_EQ(run_prompt(m, 3, p), 0);
  EXPECT_EQ(m.pool().num_cached(), 0);
  const KvCacheStats s = m.stats();
  EXPECT_EQ(s.hits, 0);
  EXPECT_EQ(s.hit_tokens, 0);
  EXPECT_EQ(s.evictions, 0);
  for (int32_t b : m.block_table(2)) EXPECT_EQ(m.pool().ref_count(b), 1);
  expect_ok(m);
}

TEST(KvCacheManager, ExtraKeySeparatesIdenticalPrefixes) {
  KvCacheManager m({.num_blocks = 64, .block_size = 16});
  const auto p = random_tokens(100, 5);
  run_prompt(m, 1, p, "lora-1");
  EXPECT_EQ(m.find_cached_prefix(2, p, ""), 0);
  EXPECT_EQ(m.find_cached_prefix(3, p, "lora-2"), 0);
  EXPECT_EQ(m.find_cached_prefix(4, p, "lora-1"), 96);
  run_prompt(m, 5, p, "");
  EXPECT_EQ(m.find_cached_prefix(6, p, ""), 96);
  EXPECT_EQ(m.pool().num_cached(), 12);  // two separate chains of 6
}

TEST(KvCacheManager, FailedAllocationLeavesNoPartialState) {
  KvCacheManager m({.num_blocks = 8, .block_size = 4});
  const auto x = random_tokens(8, 6);
  run_prompt(m, 1, x);  // blocks 0 1, cached
  m.free(1);
  ASSERT_TRUE(m.allocate(2, 20));  // blocks 2..6; free: 7, then cached 1, 0
  EXPECT_EQ(m.pool().free_queue(), (std::vector<int32_t>{7, 1, 0}));

  // A new request without a prefix.
  EXPECT_FALSE(m.can_allocate(3, 16));
  EXPECT_EQ(m.allocate(3, 16).status, AllocStatus::kNoRoom);
  EXPECT_FALSE(m.contains(3));
  // A running request that cannot grow keeps its table.
  EXPECT_EQ(m.allocate(2, 36).status, AllocStatus::kNoRoom);
  EXPECT_EQ(m.block_table(2).size(), 5u);
  EXPECT_EQ(m.num_tokens(2), 20);
  // A request whose found prefix sits in the free queue: those blocks count against the room.
  const auto y = concat(x, random_tokens(9, 7));  // 17 tokens: 2 cached blocks + 3 new
  EXPECT_EQ(m.find_cached_prefix(4, y), 8);
  EXPECT_FALSE(m.can_allocate(4, 9));
  EXPECT_EQ(m.allocate(4, 17).status, AllocStatus::kNoRoom);
  EXPECT_EQ(m.pool().free_queue(), (std::vector<int32_t>{7, 1, 0}));
  EXPECT_EQ(m.pool().num_cached(), 2);
  EXPECT_TRUE(m.block_table(4).empty());
  EXPECT_EQ(m.stats().evictions, 0);
  expect_ok(m);
  // A smaller step fits: the found blocks are taken first, then one new block.
  EXPECT_TRUE(m.can_allocate(4, 4));
  Allocation a = m.allocate(4, 12);
  ASSERT_TRUE(a);
  EXPECT_EQ(vec(a.block_table), (std::vector<int32_t>{0, 1, 7}));
  EXPECT_EQ(m.num_free_blocks(), 0);
  EXPECT_EQ(m.usage(), 1.0);
  m.free(2);
  m.free(4);
  EXPECT_EQ(m.num_free_blocks(), 8);
  expect_ok(m);
}

TEST(KvCacheManager, FoundPrefixEvictedBeforeAllocateIsReportedStale) {
  KvCacheManager m({.num_blocks = 4, .block_size = 4});
  const auto x = random_tokens(8, 8);
  run_prompt(m, 1, x);
  m.free(1);
  EXPECT_EQ(m.find_cached_prefix(2, concat(x, {5})), 8);
  ASSERT_TRUE(m.allocate(3, 16));  // every block, evicting x's
  EXPECT_EQ(m.stats().evictions, 2);
  m.free(3);
  EXPECT_FALSE(m.can_allocate(2, 1));
  EXPECT_EQ(m.allocate(2, 9).status, AllocStatus::kStalePrefix);
  EXPECT_TRUE(m.block_table(2).empty());
  EXPECT_EQ(m.num_free_blocks(), 4);
  EXPECT_EQ(m.find_cached_prefix(2, concat(x, {5})), 0);  // look again
  EXPECT_TRUE(m.allocate(2, 9));
  expect_ok(m);
}

TEST(KvCacheManager, TablesGrowByWholeBlocks) {
  KvCacheManager m({.num_blocks = 16, .block_size = 16});
  struct Step {
    int32_t total;
    size_t blocks;
  } steps[] = {{1, 1}, {16, 1}, {17, 2}, {32, 2}, {33, 3}, {20, 3}, {48, 3}, {49, 4}};
  std::vector<int32_t> before;
  for (const Step& s : steps) {
    SCOPED_TRACE(s.total);
    Allocation a = m.allocate(1, s.total);
    ASSERT_TRUE(a);
    ASSERT_EQ(a.block_table.size(), s.blocks);
    EXPECT_TRUE(std::equal(before.begin(), before.end(), a.block_table.begin()));  // prefix kept
    before = vec(a.block_table);
  }
  EXPECT_EQ(m.num_tokens(1), 49);
  EXPECT_TRUE(m.can_allocate(1, 16 * 16 - 49));  // exactly the whole pool
  EXPECT_FALSE(m.can_allocate(1, 16 * 16 - 48));
  EXPECT_NEAR(m.usage(), 4.0 / 16, 1e-12);
}

TEST(KvCacheManager, ForkSharesFullBlocksAndCopiesThePartialOne) {
  KvCacheManager m({.num_blocks = 10, .block_size = 4});
  const auto p = random_tokens(10, 9);
  run_prompt(m, 1, p);  // blocks 0 1 full and cached, 2 holds 2 tokens
  ASSERT_TRUE(m.allocate(1, 14));  // one block ahead: 3
  ForkResult f = m.fork(1, 2);
  ASSERT_TRUE(f);
  EXPECT_EQ(vec(f.block_table), (std::vector<int32_t>{0, 1, 4, 5}));
  EXPECT_EQ(f.copy.src, 2);
  EXPECT_EQ(f.copy.dst, 4);
  EXPECT_EQ(f.copy.num_tokens, 2);
  EXPECT_EQ(m.pool().ref_count(0), 2);
  EXPECT_EQ(m.pool().ref_count(2), 1);
  EXPECT_EQ(m.num_tokens(2), 14);
  EXPECT_EQ(m.num_computed(2), 10);
  // The child continues on its own: its next full block gets its own hash.
  auto child_tokens = concat(p, {7, 7});
  m.mark_computed(2, 12, child_tokens);
  EXPECT_TRUE(m.pool().is_cached(4));
  EXPECT_EQ(m.find_cached_prefix(3, concat(child_tokens, {1})), 12);
  m.free(3);

  // Block-aligned parent: nothing to copy.
  run_prompt(m, 4, random_tokens(8, 10));  // blocks 6 7
  ForkResult g = m.fork(4, 5);
  ASSERT_TRUE(g);
  EXPECT_EQ(g.copy.num_tokens, 0);
  EXPECT_EQ(vec(g.block_table), vec(m.block_table(4)));

  // No room for the fresh blocks: nothing changes.
  ASSERT_TRUE(m.allocate(4, 16));  // takes the last two free blocks
  EXPECT_EQ(m.num_free_blocks(), 0);
  EXPECT_EQ(m.fork(1, 6).status, AllocStatus::kNoRoom);  // 1 needs two fresh blocks
  EXPECT_EQ(m.pool().ref_count(0), 2);
  EXPECT_FALSE(m.contains(6));
  for (RequestId id : {1, 2, 4, 5}) m.free(id);
  EXPECT_EQ(m.num_free_blocks(), 10);
  expect_ok(m);
}

TEST(KvCacheManager, ConcurrentIdenticalPromptsRegisterOnce) {
  KvCacheManager m({.num_blocks = 16, .block_size = 4});
  const auto p = random_tokens(13, 12);
  EXPECT_EQ(m.find_cached_prefix(1, p), 0);
  EXPECT_EQ(m.find_cached_prefix(2, p), 0);  // neither has computed anything yet
  ASSERT_TRUE(m.allocate(1, 13));
  ASSERT_TRUE(m.allocate(2, 13));
  m.mark_computed(1, 13, p);
  m.mark_computed(2, 13, p);
  EXPECT_EQ(m.pool().num_cached(), 3);  // request 1's copies; request 2's stay private
  for (int32_t b : m.block_table(2)) EXPECT_FALSE(m.pool().is_cached(b));
  m.free(2);
  m.free(1);
  EXPECT_EQ(m.find_cached_prefix(3, p), 12);
  expect_ok(m);
}

TEST(KvCacheManager, ResetPrefixCacheForgetsHashesButNotRunningRequests) {
  KvCacheManager m({.num_blocks = 32, .block_size = 4});
  const auto p = random_tokens(20, 13);
  run_prompt(m, 1, p);
  EXPECT_EQ(m.find_cached_prefix(2, p), 16);
  m.reset_prefix_cache();
  EXPECT_EQ(m.pool().num_cached(), 0);
  EXPECT_EQ(m.allocate(2, 20).status, AllocStatus::kStalePrefix);
  EXPECT_EQ(m.find_cached_prefix(2, p), 0);
  // Request 1 keeps running; its later full blocks are registered again.
  ASSERT_TRUE(m.allocate(1, 24));
  m.mark_computed(1, 24, concat(p, {1, 2, 3, 4}));
  EXPECT_EQ(m.pool().num_cached(), 1);
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.num_free_blocks(), 32);
  expect_ok(m);
}

TEST(KvCacheManager, FreeOfUnknownOrPendingRequestIsHarmless) {
  KvCacheManager m({.num_blocks = 4, .block_size = 4});
  m.free(42);
  EXPECT_EQ(m.find_cached_prefix(1, random_tokens(9, 14)), 0);
  EXPECT_TRUE(m.contains(1));
  m.free(1);
  EXPECT_FALSE(m.contains(1));
  EXPECT_EQ(m.num_free_blocks(), 4);
}

// Speculative decoding's rollback: the request drafted past a block boundary, then kept less.
TEST(KvCacheManager, TrimReleasesBlocksWhollyBeyondTheNewLength) {
  KvCacheManager m({.num_blocks = 16, .block_size = 4});
  const auto p = random_tokens(6, 20);
  run_prompt(m, 1, p);                 // blocks 0 1 (block 0 cached)
  ASSERT_TRUE(m.allocate(1, 6 + 7));   // 6 + 1 + 6 drafts: 13 positions, blocks 0..3
  EXPECT_EQ(m.num_free_blocks(), 12);
  Result<TrimResult> r = m.trim(1, 8);  // accepted up to position 8: block 2 and 3 go
  ASSERT_TRUE(r) << r.error();
  ASSERT_TRUE(*r);
  EXPECT_EQ(r->num_released_blocks, 2);
  EXPECT_EQ(r->copy.num_tokens, 0);
  EXPECT_EQ(vec(r->block_table), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(vec(m.block_table(1)), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(m.num_tokens(1), 8);
  EXPECT_EQ(m.num_computed(1), 6);
  EXPECT_EQ(m.num_free_blocks(), 14);
  expect_ok(m);
  m.free(1);
  EXPECT_EQ(m.num_free_blocks(), 16);  // back to the starting value
  EXPECT_EQ(m.usage(), 0.0);
  expect_ok(m);
}

TEST(KvCacheManager, TrimThenAllocateReusesTheReleasedBlocks) {
  KvCacheManager m({.num_blocks = 8, .block_size = 4});
  ASSERT_TRUE(m.allocate(1, 16));  // blocks 0..3, nothing cached (never went through find)
  ASSERT_TRUE(m.trim(1, 5).ok());
  EXPECT_EQ(vec(m.block_table(1)), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(m.pool().free_queue().front(), 2);  // released tail first: 3, then 2 at the head
  ASSERT_TRUE(m.allocate(1, 12));
  EXPECT_EQ(vec(m.block_table(1)), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(m.num_tokens(1), 12);
  EXPECT_TRUE(m.can_allocate(1, 8 * 4 - 12));  // the whole pool is available again
  EXPECT_FALSE(m.can_allocate(1, 8 * 4 - 11));
  // Trim to 0 keeps the request known with an empty table; it can grow again.
  ASSERT_TRUE(m.trim(1, 0).ok());
  EXPECT_TRUE(m.contains(1));
  EXPECT_TRUE(m.block_table(1).empty());
  EXPECT_EQ(m.num_free_blocks(), 8);
  ASSERT_TRUE(m.allocate(1, 1));
  EXPECT_EQ(m.block_table(1).size(), 1u);
  m.free(1);
  EXPECT_EQ(m.num_free_blocks(), 8);
  expect_ok(m);
}

TEST(KvCacheManager, TrimToTheSameLengthIsANoOp) {
  KvCacheManager m({.num_blocks = 8, .block_size = 4});
  const auto p = random_tokens(10, 21);
  run_prompt(m, 1, p);
  const auto before = vec(m.block_table(1));
  const int32_t cached = m.pool().num_cached();
  Result<TrimResult> r = m.trim(1, 10);
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(*r);
  EXPECT_EQ(r->num_released_blocks, 0);
  EXPECT_EQ(r->copy.num_tokens, 0);
  EXPECT_EQ(vec(m.block_table(1)), before);
  EXPECT_EQ(m.num_tokens(1), 10);
  EXPECT_EQ(m.num_computed(1), 10);
  EXPECT_EQ(m.pool().num_cached(), cached);
  expect_ok(m);
}

TEST(KvCacheManager, TrimRejectsBadInputAndChangesNothing) {
  KvCacheManager m({.num_blocks = 8, .block_size = 4});
  const auto p = random_tokens(9, 22);
  EXPECT_FALSE(m.trim(7, 0).ok());  // unknown
  EXPECT_EQ(m.find_cached_prefix(2, p), 0);
  Result<TrimResult> pending = m.trim(2, 0);  // only a find result, no blocks yet
  ASSERT_FALSE(pending.ok());
  EXPECT_NE(pending.error().find("no blocks"), std::string::npos) << pending.error();
  run_prompt(m, 1, p);
  Result<TrimResult> longer = m.trim(1, 10);  // trim never grows
  ASSERT_FALSE(longer.ok());
  EXPECT_NE(longer.error().find("outside [0, 9]"), std::string::npos) << longer.error();
  EXPECT_FALSE(m.trim(1, -1).ok());
  EXPECT_EQ(m.num_tokens(1), 9);
  EXPECT_EQ(m.block_table(1).size(), 3u);
  expect_ok(m);
}

// A block that was registered full and cached, then cut into: its hash must go, since the
// request will overwrite the slots past the cut. Blocks wholly beyond stay findable.
TEST(KvCacheManager, TrimIntoAPrivateCachedBlockForgetsItsHash) {
  KvCacheManager m({.num_blocks = 16, .block_size = 4});
  const auto p = random_tokens(12, 23);
  run_prompt(m, 1, p);  // blocks 0 1 2, all full and cached
  EXPECT_EQ(m.pool().num_cached(), 3);
  ASSERT_TRUE(m.trim(1, 6).ok());  // keeps block 0 and slots 0..1 of block 1; block 2 released
  EXPECT_EQ(vec(m.block_table(1)), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(m.num_computed(1), 6);
  EXPECT_TRUE(m.pool().is_cached(0));
  EXPECT_FALSE(m.pool().is_cached(1));  // about to be overwritten
  EXPECT_TRUE(m.pool().is_cached(2));   // free, its KV still matches its hash
  EXPECT_EQ(m.pool().ref_count(2), 0);
  expect_ok(m);
  // A request with the old prompt shares only block 0 now.
  EXPECT_EQ(m.find_cached_prefix(2, concat(p, {1})), 4);
  m.free(2);
  // The trimmed request continues with other tokens; its block 1 gets their hash once full.
  auto other = std::vector<int32_t>(p.begin(), p.begin() + 6);
  other = concat(other, {5, 5});
  ASSERT_TRUE(m.allocate(1, 8));
  m.mark_computed(1, 8, other);
  EXPECT_TRUE(m.pool().is_cached(1));
  EXPECT_EQ(m.find_cached_prefix(3, concat(other, {1})), 8);
  m.free(3);
  m.free(1);
  EXPECT_EQ(m.num_free_blocks(), 16);
  expect_ok(m);
}

// Prefix-cached blocks another request holds: trimming one request leaves the other's intact.
TEST(KvCacheManager, TrimKeepsSharedPrefixBlocksIntactForTheOtherRequest) {
  KvCacheManager m({.num_blocks = 16, .block_size = 4});
  const auto p = random_tokens(13, 24);
  run_prompt(m, 1, p);                              // blocks 0 1 2 cached, 3 partial
  EXPECT_EQ(run_prompt(m, 2, p), 12);               // shares 0 1 2, own block 4
  const auto table1 = vec(m.block_table(1));
  // A cut on a block boundary inside the shared prefix: the shared blocks beyond lose a user.
  Result<TrimResult> r = m.trim(2, 8);
  ASSERT_TRUE(r) << r.error();
  ASSERT_TRUE(*r);
  EXPECT_EQ(vec(m.block_table(2)), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(r->copy.num_tokens, 0);
  EXPECT_EQ(m.pool().ref_count(2), 1);
  EXPECT_TRUE(m.pool().is_cached(2));
  // A cut inside a shared block: request 2 gets a private copy, the shared block is untouched.
  r = m.trim(2, 6);
  ASSERT_TRUE(r) << r.error();
  ASSERT_TRUE(*r);
  ASSERT_EQ(r->block_table.size(), 2u);
  const int32_t fresh = r->block_table[1];
  EXPECT_NE(fresh, 1);
  EXPECT_EQ(r->copy.src, 1);
  EXPECT_EQ(r->copy.dst, fresh);
  EXPECT_EQ(r->copy.num_tokens, 2);
  EXPECT_EQ(m.pool().ref_count(1), 1);
  EXPECT_TRUE(m.pool().is_cached(1));   // still the shared copy of p's second block
  EXPECT_FALSE(m.pool().is_cached(fresh));
  EXPECT_EQ(vec(m.block_table(1)), table1);
  EXPECT_EQ(m.find_cached_prefix(3, concat(p, {1})), 12);  // request 1's prefix is whole
  m.free(3);
  expect_ok(m);
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.num_free_blocks(), 16);
  expect_ok(m);
}

TEST(KvCacheManager, TrimOfAForkedChildLeavesTheParentIntact) {
  KvCacheManager m({.num_blocks = 8, .block_size = 4});
  const auto p = random_tokens(9, 25);
  run_prompt(m, 1, p);  // blocks 0 1 full, 2 partial
  ForkResult f = m.fork(1, 2);
  ASSERT_TRUE(f);       // shares 0 1, fresh 3
  const auto parent = vec(m.block_table(1));
  Result<TrimResult> r = m.trim(2, 3);  // into shared block 0
  ASSERT_TRUE(r) << r.error();
  ASSERT_TRUE(*r);
  EXPECT_EQ(r->num_released_blocks, 2);
  EXPECT_EQ(r->copy.src, 0);
  EXPECT_EQ(r->copy.num_tokens, 3);
  EXPECT_EQ(m.pool().ref_count(0), 1);
  EXPECT_EQ(m.pool().ref_count(1), 1);
  EXPECT_EQ(vec(m.block_table(1)), parent);
  EXPECT_TRUE(m.pool().is_cached(0));
  EXPECT_EQ(m.num_tokens(1), 9);
  EXPECT_EQ(m.num_tokens(2), 3);
  EXPECT_EQ(m.num_computed(2), 3);
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.num_free_blocks(), 8);
  expect_ok(m);
}

TEST(KvCacheManager, TrimIntoASharedBlockWithNoRoomChangesNothing) {
  KvCacheManager m({.num_blocks = 4, .block_size = 4});
  const auto p = random_tokens(8, 26);
  run_prompt(m, 1, p);                       // blocks 0 1
  EXPECT_EQ(run_prompt(m, 2, concat(p, {3})), 8);  // shares 0 1, own block 2
  ASSERT_TRUE(m.allocate(3, 4));             // block 3: the pool is full
  ASSERT_EQ(m.num_free_blocks(), 0);
  // Cutting request 2 inside shared block 1: its released block 2 makes room.
  Result<TrimResult> r = m.trim(2, 6);
  ASSERT_TRUE(r) << r.error();
  ASSERT_TRUE(*r);
  EXPECT_EQ(vec(r->block_table), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(r->copy.src, 1);
  EXPECT_EQ(r->copy.dst, 2);
  // Request 1 cut inside block 0, which request 2 still shares: the pool is full again, but
  // request 1's block 1 (no longer shared) is released first, so the copy has room.
  ASSERT_EQ(m.num_free_blocks(), 0);
  Result<TrimResult> room = m.trim(1, 2);
  ASSERT_TRUE(room) << room.error();
  EXPECT_TRUE(*room);
  EXPECT_EQ(room->copy.src, 0);
  EXPECT_EQ(room->copy.dst, 1);
  EXPECT_EQ(room->copy.num_tokens, 2);
  expect_ok(m);
  // No room at all: the cut block is shared and nothing is released.
  KvCacheManager n({.num_blocks = 3, .block_size = 4});
  const auto q = random_tokens(4, 27);
  run_prompt(n, 1, q);                        // block 0
  EXPECT_EQ(run_prompt(n, 2, concat(q, {1})), 4);  // shares 0, own block 1
  ASSERT_TRUE(n.allocate(3, 4));              // block 2: full pool
  Result<TrimResult> full = n.trim(1, 3);     // request 1's only block is shared, nothing freed
  ASSERT_TRUE(full) << full.error();
  EXPECT_EQ(full->status, AllocStatus::kNoRoom);
  EXPECT_FALSE(*full);
  EXPECT_TRUE(full->block_table.empty());
  EXPECT_EQ(vec(n.block_table(1)), (std::vector<int32_t>{0}));
  EXPECT_EQ(n.num_tokens(1), 4);
  EXPECT_EQ(n.pool().ref_count(0), 2);
  EXPECT_TRUE(n.pool().is_cached(0));
  Status st = n.pool().check_invariants();
  EXPECT_TRUE(st.ok());
}

}  // namespace
}  // namespace cadenza::kv
