// KV tiers: MemoryTier and DiskTier budgets and LRU order, bit-exact round trips, disk files that
// are truncated, damaged or another model's (skipped, never returned), the stack's cascade, and
// KvCacheManager demoting evicted blocks and promoting them back on a prefix lookup.
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kv/disk_tier.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_tier_stack.h"
#include "kv/memory_tier.h"
#include "temp_dir.h"

namespace cadenza::kv {
namespace {

constexpr size_t kBytes = 1000;  // payload size in these tests

BlockHash hash_of(int i) { return root_hash("block " + std::to_string(i)); }

std::vector<uint8_t> payload(int i, size_t n = kBytes) {
  std::mt19937 rng(static_cast<uint32_t>(i));
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::vector<uint8_t> get(KvTier& t, int i, bool* ok = nullptr) {
  std::vector<uint8_t> out(kBytes);
  const bool r = t.get(hash_of(i), out);
  if (ok) *ok = r;
  return r ? out : std::vector<uint8_t>{};
}

TEST(MemoryTier, KeepsBudgetEvictsLeastRecentlyUsedIntoSink) {
  MemoryTier t(3 * kBytes);
  std::vector<BlockHash> spilled;
  const KvTierSink sink = [&](const BlockHash& h, std::span<const uint8_t> p) {
    EXPECT_EQ(p.size(), kBytes);
    spilled.push_back(h);
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(t.put(hash_of(i), payload(i), sink));
  EXPECT_EQ(t.stats().bytes, static_cast<int64_t>(3 * kBytes));
  EXPECT_EQ(get(t, 0), payload(0));  // 0 is now the most recently used
  ASSERT_TRUE(t.put(hash_of(3), payload(3), sink));
  ASSERT_EQ(spilled.size(), 1u);
  EXPECT_EQ(spilled[0], hash_of(1));
  EXPECT_FALSE(t.contains(hash_of(1)));
  EXPECT_TRUE(t.contains(hash_of(0)));
  const KvTierStats s = t.stats();
  EXPECT_EQ(s.bytes, static_cast<int64_t>(3 * kBytes));
  EXPECT_EQ(s.blocks, 3);
  EXPECT_EQ(s.evictions, 1);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.demotions, 4);
  EXPECT_FALSE(t.put(hash_of(9), payload(9, 4 * kBytes)));  // larger than the whole budget
  EXPECT_EQ(t.clear(), static_cast<int64_t>(3 * kBytes));
  EXPECT_EQ(t.stats().bytes, 0);
}

BlockHash model_a() { return root_hash("model a"); }
BlockHash model_b() { return root_hash("model b"); }

TEST(DiskTier, RoundTripsBitExactAndSurvivesReopen) {
  test::TempDir dir("kv-disk");
  {
    auto t = DiskTier::open(dir.path(), 10 * (kBytes + kDiskTierHeaderBytes), model_a(), kBytes);
    ASSERT_TRUE(t) << t.error();
    for (int i = 0; i < 4; ++i) ASSERT_TRUE((*t)->put(hash_of(i), payload(i)));
    EXPECT_EQ((*t)->stats().bytes, static_cast<int64_t>(4 * (kBytes + kDiskTierHeaderBytes)));
    EXPECT_EQ(get(**t, 2), payload(2));
  }
  auto t = DiskTier::open(dir.path(), 10 * (kBytes + kDiskTierHeaderBytes), model_a(), kBytes);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ((*t)->stats().blocks, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(get(**t, i), payload(i)) << i;
  bool ok = true;
  get(**t, 7, &ok);
  EXPECT_FALSE(ok);
}

TEST(DiskTier, HardBudgetEvictsOldestFiles) {
  test::TempDir dir("kv-disk");
  const int64_t file = kBytes + kDiskTierHeaderBytes;
  auto t = DiskTier::open(dir.path(), 3 * file, model_a(), kBytes);
  ASSERT_TRUE(t);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*t)->put(hash_of(i), payload(i)));
  EXPECT_EQ(get(**t, 0), payload(0));
  ASSERT_TRUE((*t)->put(hash_of(3), payload(3)));
  EXPECT_FALSE((*t)->contains(hash_of(1)));
  EXPECT_FALSE(std::filesystem::exists((*t)->path_of(hash_of(1))));
  EXPECT_LE((*t)->stats().bytes, 3 * file);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += e.path().extension() == ".kvb";
  EXPECT_EQ(files, 3u);
  // A smaller budget on reopen deletes the oldest until it fits.
  t = DiskTier::open(dir.path(), 2 * file, model_a(), kBytes);
  ASSERT_TRUE(t);
  EXPECT_EQ((*t)->stats().blocks, 2);
  EXPECT_LE((*t)->stats().bytes, 2 * file);
}

TEST(DiskTier, TruncatedDamagedAndForeignFilesAreSkipped) {
  test::TempDir dir("kv-disk");
  const int64_t cap = 100 * (kBytes + kDiskTierHeaderBytes);
  std::filesystem::path p_trunc, p_flip, p_late;
  {
    auto t = DiskTier::open(dir.path(), cap, model_a(), kBytes);
    ASSERT_TRUE(t);
    for (int i = 0; i < 4; ++i) ASSERT_TRUE((*t)->put(hash_of(i), payload(i)));
    p_trunc = (*t)->path_of(hash_of(0));
    p_flip = (*t)->path_of(hash_of(1));
    p_late = (*t)->path_of(hash_of(2));
    auto other = DiskTier::open(dir.path(), cap, model_b(), kBytes);  // same dir, other model
    ASSERT_TRUE(other);
    EXPECT_EQ((*other)->stats().blocks, 0);  // model a's files are foreign to it
    ASSERT_TRUE((*other)->put(hash_of(10), payload(10)));
  }
  std::filesystem::resize_file(p_trunc, kDiskTierHeaderBytes + kBytes / 2);
  {
    std::fstream f(p_flip, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(kDiskTierHeaderBytes + 10));
    f.put('\x5a');  // a payload byte (the original is random: the checksum catches any change)
    char c = 0;
    f.seekg(static_cast<std::streamoff>(kDiskTierHeaderBytes + 10));
    f.get(c);
    if (c == static_cast<char>(payload(1)[10])) {  // the byte happened to be 0x5a: flip it
      f.seekp(static_cast<std::streamoff>(kDiskTierHeaderBytes + 10));
      f.put(static_cast<char>(~c));
    }
  }
  { std::ofstream(dir.file("garbage.kvb")) << "not a block"; }
  auto t = DiskTier::open(dir.path(), cap, model_a(), kBytes);
  ASSERT_TRUE(t);
  // The truncated file, the garbage file and model b's file are skipped when indexing.
  EXPECT_FALSE((*t)->contains(hash_of(0)));
  EXPECT_FALSE((*t)->contains(hash_of(10)));
  EXPECT_EQ((*t)->stats().rejected, 3);
  // The flipped payload byte is only visible to the checksum: get() refuses it and drops it.
  ASSERT_TRUE((*t)->contains(hash_of(1)));
  bool ok = true;
  get(**t, 1, &ok);
  EXPECT_FALSE(ok);
  EXPECT_FALSE((*t)->contains(hash_of(1)));
  EXPECT_FALSE(std::filesystem::exists(p_flip));
  // A file truncated after indexing (a crash, another process) is refused by get() too.
  std::filesystem::resize_file(p_late, kDiskTierHeaderBytes + 3);
  get(**t, 2, &ok);
  EXPECT_FALSE(ok);
  EXPECT_EQ(get(**t, 3), payload(3));
  EXPECT_EQ((*t)->stats().rejected, 5);
  // Model b's file is still there (not ours to delete).
  auto b = DiskTier::open(dir.path(), cap, model_b(), kBytes);
  ASSERT_TRUE(b);
  EXPECT_EQ(get(**b, 10), payload(10));
}

TEST(KvTierStack, CascadesMemoryToDiskAndPromotes) {
  test::TempDir dir("kv-stack");
  std::vector<std::unique_ptr<KvTier>> tiers;
  tiers.push_back(std::make_unique<MemoryTier>(2 * kBytes));
  auto disk = DiskTier::open(dir.path(), 100 * (kBytes + kDiskTierHeaderBytes), model_a(), kBytes);
  ASSERT_TRUE(disk);
  tiers.push_back(std::move(*disk));
  KvTierStack stack(kBytes, std::move(tiers));
  for (int i = 0; i < 5; ++i) stack.demote(hash_of(i), payload(i));
  KvTier& mem = *stack.tiers()[0];
  KvTier& dsk = *stack.tiers()[1];
  EXPECT_EQ(mem.stats().blocks, 2);  // 3 and 4
  EXPECT_EQ(dsk.stats().blocks, 3);  // 0, 1, 2 spilled down
  std::vector<uint8_t> out(kBytes);
  ASSERT_TRUE(stack.promote(hash_of(4), out));
  EXPECT_EQ(out, payload(4));
  EXPECT_FALSE(mem.contains(hash_of(4)));  // moved up to the pool
  ASSERT_TRUE(stack.promote(hash_of(0), out));
  EXPECT_EQ(out, payload(0));
  EXPECT_TRUE(dsk.contains(hash_of(0)));  // the disk keeps its copy
  EXPECT_EQ(mem.stats().promotions, 1);
  EXPECT_EQ(dsk.stats().promotions, 1);
  EXPECT_FALSE(stack.promote(hash_of(42), out));
  stack.flush_to_last();
  EXPECT_TRUE(dsk.contains(hash_of(3)));
  EXPECT_EQ(stack.clear("memory"), static_cast<int64_t>(kBytes));
  EXPECT_FALSE(stack.clear("bogus").has_value());
  EXPECT_GT(*stack.clear(), 0);
  EXPECT_FALSE(stack.contains(hash_of(3)));
}

// A fake KV memory: one payload per pool block, filled from the block's tokens, so that a block
// promoted back can be compared with what was computed.
struct FakeKv {
  size_t bytes;
  std::vector<std::vector<uint8_t>> blocks;
  KvBlockIo io() {
    return {[this](int32_t b, std::span<uint8_t> out) {
              std::copy(blocks[static_cast<size_t>(b)].begin(), blocks[static_cast<size_t>(b)].end(), out.begin());
              return true;
            },
            [this](int32_t b, std::span<const uint8_t> in) {
              blocks[static_cast<size_t>(b)].assign(in.begin(), in.end());
              return true;
            }};
  }
  // "Computes" a block: content derived from the chain hash of the tokens up to its end.
  void compute(int32_t b, const BlockHash& h) {
    std::mt19937 rng(static_cast<uint32_t>(BlockHashHasher{}(h)));
    for (auto& x : blocks[static_cast<size_t>(b)]) x = static_cast<uint8_t>(rng());
  }
};

std::vector<int32_t> tokens_of(int seed, int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = seed * 100000 + i;
  return v;
}

TEST(KvCacheManagerTiers, EvictedPrefixComesBackFromMemoryThenDiskBitExact) {
  test::TempDir dir("kv-mgr");
  constexpr int32_t kBlock = 4, kPool = 8;
  FakeKv kv{kBytes, std::vector<std::vector<uint8_t>>(kPool, std::vector<uint8_t>(kBytes))};
  std::vector<std::unique_ptr<KvTier>> tiers;
  tiers.push_back(std::make_unique<MemoryTier>(4 * kBytes));
  auto disk = DiskTier::open(dir.path(), 100 * (kBytes + kDiskTierHeaderBytes), model_a(), kBytes);
  ASSERT_TRUE(disk);
  tiers.push_back(std::move(*disk));
  KvTierStack stack(kBytes, std::move(tiers));
  KvCacheManager m({.num_blocks = kPool, .block_size = kBlock});
  m.attach_tiers(&stack, kv.io());

  // Each prompt: 6 full blocks + 1 token. Compute, cache, free.
  std::vector<std::vector<uint8_t>> first_payloads;
  auto run = [&](RequestId id, const std::vector<int32_t>& t) {
    const int32_t cached = m.find_cached_prefix(id, t);
    EXPECT_TRUE(m.allocate(id, static_cast<int32_t>(t.size())));
    const auto table = m.block_table(id);
    BlockHash h = root_hash({});
    for (int32_t i = 0; i < static_cast<int32_t>(t.size()) / kBlock; ++i) {
      h = chain_hash(h, std::span(t).subspan(static_cast<size_t>(i * kBlock), kBlock));
      if (i * kBlock >= cached) kv.compute(table[static_cast<size_t>(i)], h);
    }
    m.mark_computed(id, static_cast<int32_t>(t.size()), t);
    std::vector<std::vector<uint8_t>> out;
    for (int32_t i = 0; i < static_cast<int32_t>(t.size()) / kBlock; ++i) out.push_back(kv.blocks[static_cast<size_t>(table[static_cast<size_t>(i)])]);
    m.free(id);
    EXPECT_TRUE(m.pool().check_invariants().ok());
    return std::pair(cached, out);
  };
  const auto first = tokens_of(1, 6 * kBlock + 1);
  auto [c0, p0] = run(1, first);
  EXPECT_EQ(c0, 0);
  for (int i = 2; i <= 4; ++i) run(static_cast<RequestId>(i), tokens_of(i, 6 * kBlock + 1));
  // The pool (8 blocks) has long forgotten the first prompt: it is in the tiers.
  EXPECT_EQ(m.pool().lookup(chain_hash(root_hash({}), std::span(first).subspan(0, kBlock))), -1);
  auto [c1, p1] = run(10, first);
  EXPECT_EQ(c1, 6 * kBlock);  // every full block came back
  EXPECT_EQ(p1, p0);          // bit-exact
  EXPECT_EQ(m.stats().tier_hit_blocks, 6);
  EXPECT_GT(stack.tiers()[0]->stats().demotions + stack.tiers()[1]->stats().demotions, 0);

  // Shutdown: everything cached goes to disk; a new manager over a new stack on the same
  // directory (a restart) finds the prompt there.
  EXPECT_GT(m.persist_to_tiers(), 0);
  FakeKv kv2{kBytes, std::vector<std::vector<uint8_t>>(kPool, std::vector<uint8_t>(kBytes))};
  std::vector<std::unique_ptr<KvTier>> tiers2;
  auto disk2 = DiskTier::open(dir.path(), 100 * (kBytes + kDiskTierHeaderBytes), model_a(), kBytes);
  ASSERT_TRUE(disk2);
  tiers2.push_back(std::move(*disk2));
  KvTierStack stack2(kBytes, std::move(tiers2));
  KvCacheManager m2({.num_blocks = kPool, .block_size = kBlock});
  m2.attach_tiers(&stack2, kv2.io());
  const int32_t c2 = m2.find_cached_prefix(20, first);
  EXPECT_EQ(c2, 6 * kBlock);
  ASSERT_TRUE(m2.allocate(20, static_cast<int32_t>(first.size())));
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(kv2.blocks[static_cast<size_t>(m2.block_table(20)[i])], p0[i]) << i;
  EXPECT_EQ(stack2.tiers()[0]->stats().promotions, 6);
  m2.free(20);
  EXPECT_TRUE(m2.pool().check_invariants().ok());
}

TEST(KvCacheManagerTiers, PromotionStopsWhenThePoolIsFull) {
  constexpr int32_t kBlock = 4, kPool = 8;
  FakeKv kv{kBytes, std::vector<std::vector<uint8_t>>(kPool, std::vector<uint8_t>(kBytes))};
  std::vector<std::unique_ptr<KvTier>> tiers;
  tiers.push_back(std::make_unique<MemoryTier>(100 * kBytes));
  KvTierStack stack(kBytes, std::move(tiers));
  KvCacheManager m({.num_blocks = kPool, .block_size = kBlock});
  m.attach_tiers(&stack, kv.io());
  const auto a = tokens_of(1, 6 * kBlock + 1);
  m.find_cached_prefix(1, a);
  ASSERT_TRUE(m.allocate(1, static_cast<int32_t>(a.size())));
  m.mark_computed(1, static_cast<int32_t>(a.size()), a);
  m.free(1);
  const auto b = tokens_of(2, 6 * kBlock + 1);  // evicts most of a's blocks into memory
  m.find_cached_prefix(2, b);
  ASSERT_TRUE(m.allocate(2, static_cast<int32_t>(b.size())));
  m.mark_computed(2, static_cast<int32_t>(b.size()), b);
  // b holds 7 of 8 blocks: at most one of a's blocks can come back while b runs.
  const int32_t found = m.find_cached_prefix(3, a);
  EXPECT_LE(found, kBlock);
  EXPECT_TRUE(m.pool().check_invariants().ok());
  m.free(2);
  EXPECT_EQ(m.find_cached_prefix(3, a), 6 * kBlock);
  EXPECT_TRUE(m.pool().check_invariants().ok());
}

}  // namespace
}  // namespace cadenza::kv
