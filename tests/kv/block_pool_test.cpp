#include "kv/block_pool.h"

#include <vector>

#include <gtest/gtest.h>

namespace cadenza::kv {
namespace {

BlockHash hash_of(int32_t i) { return chain_hash(root_hash("pool-test"), std::vector<int32_t>{i}); }

void expect_ok(const BlockPool& pool) {
  Status st = pool.check_invariants();
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error());
}

TEST(BlockPool, StartsFreeInIdOrder) {
  BlockPool pool(5);
  EXPECT_EQ(pool.num_free(), 5);
  EXPECT_EQ(pool.free_queue(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_EQ(pool.num_free(), 3);
  expect_ok(pool);
}

TEST(BlockPool, UncachedGoToHeadCachedToTail) {
  BlockPool pool(4);
  const int32_t a = pool.allocate(), b = pool.allocate(), c = pool.allocate();  // 0 1 2; free: 3
  ASSERT_TRUE(pool.cache(a, hash_of(1)));
  ASSERT_TRUE(pool.cache(b, hash_of(2)));
  pool.release(a);  // cached -> tail
  pool.release(c);  // uncached -> head
  pool.release(b);  // cached -> tail
  EXPECT_EQ(pool.free_queue(), (std::vector<int32_t>{c, 3, a, b}));
  expect_ok(pool);
  // Allocation drains the head: the uncached blocks first, then the least recently released.
  EXPECT_EQ(pool.allocate(), c);
  EXPECT_EQ(pool.allocate(), 3);
  EXPECT_EQ(pool.evictions(), 0);
  EXPECT_EQ(pool.lookup(hash_of(1)), a);
  EXPECT_EQ(pool.allocate(), a);  // evicts hash 1
  EXPECT_EQ(pool.evictions(), 1);
  EXPECT_EQ(pool.lookup(hash_of(1)), -1);
  EXPECT_FALSE(pool.is_cached(a));
  EXPECT_EQ(pool.lookup(hash_of(2)), b);
  expect_ok(pool);
}

TEST(BlockPool, AcquireRevivesAFreeCachedBlockFromTheMiddle) {
  BlockPool pool(4);
  std::vector<int32_t> blocks;
  for (int i = 0; i < 4; ++i) {
    blocks.push_back(pool.allocate());
    ASSERT_TRUE(pool.cache(blocks.back(), hash_of(i)));
  }
  for (int32_t b : blocks) pool.release(b);
  EXPECT_EQ(pool.free_queue(), blocks);
  pool.acquire(pool.lookup(hash_of(2)));
  EXPECT_EQ(pool.ref_count(blocks[2]), 1);
  EXPECT_EQ(pool.free_queue(), (std::vector<int32_t>{blocks[0], blocks[1], blocks[3]}));
  pool.acquire(blocks[2]);  // a second user of a used block
  EXPECT_EQ(pool.ref_count(blocks[2]), 2);
  pool.release(blocks[2]);
  EXPECT_EQ(pool.num_free(), 3);
  pool.release(blocks[2]);  // most recently released: evicted last
  EXPECT_EQ(pool.free_queue(), (std::vector<int32_t>{blocks[0], blocks[1], blocks[3], blocks[2]}));
  expect_ok(pool);
}

TEST(BlockPool, DuplicateHashStaysPrivateAndClearForgetsAll) {
  BlockPool pool(3);
  const int32_t a = pool.allocate(), b = pool.allocate();
  EXPECT_TRUE(pool.cache(a, hash_of(7)));
  EXPECT_FALSE(pool.cache(b, hash_of(7)));
  EXPECT_FALSE(pool.is_cached(b));
  EXPECT_EQ(pool.lookup(hash_of(7)), a);
  EXPECT_EQ(pool.num_cached(), 1);
  pool.release(a);
  pool.clear_cache();
  EXPECT_EQ(pool.num_cached(), 0);
  EXPECT_EQ(pool.lookup(hash_of(7)), -1);
  EXPECT_FALSE(pool.is_cached(a));
  expect_ok(pool);
}

TEST(BlockPool, UncacheForgetsOneUsedBlocksHash) {
  BlockPool pool(3);
  const int32_t a = pool.allocate(), b = pool.allocate();
  ASSERT_TRUE(pool.cache(a, hash_of(1)));
  ASSERT_TRUE(pool.cache(b, hash_of(2)));
  pool.uncache(a);
  EXPECT_FALSE(pool.is_cached(a));
  EXPECT_EQ(pool.lookup(hash_of(1)), -1);
  EXPECT_EQ(pool.lookup(hash_of(2)), b);
  pool.uncache(a);  // already uncached: no-op
  EXPECT_EQ(pool.num_cached(), 1);
  pool.release(a);  // uncached now: to the head
  EXPECT_EQ(pool.free_queue().front(), a);
  expect_ok(pool);
}

}  // namespace
}  // namespace cadenza::kv
