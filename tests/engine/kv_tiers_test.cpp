// The engine with KV tiers (kv_tiers.h) on a tiny synthesized model: prefixes evicted from a small
// pool come back from the host-memory tier with their tokens counted as cached and the same output
// as a recompute; a second engine over the same disk directory (a restart) gets them from disk; a
// truncated file there is skipped; clear_prefix_cache drops each tier.
#include <filesystem>

#include <gtest/gtest.h>

#include "engine_test_util.h"
#include "kv/disk_tier.h"
#include "temp_dir.h"

namespace cadenza::engine {
namespace {

using test_util::EngineTest;
using test_util::Generation;
using test_util::greedy;
using test_util::random_prompt;
using test_util::run_alone;

class KvTiersTest : public EngineTest {
 protected:
  // 40 blocks of 16 tokens: room for two of the 257-token prompts below (17 blocks each).
  static EngineConfig config(int64_t memory_bytes, const std::string& disk_dir = {}) {
    EngineConfig c{.num_kv_blocks = 40, .max_num_seqs = 4, .max_model_len = 300};
    c.kv_tiers.memory_bytes = memory_bytes;
    c.kv_tiers.disk_dir = disk_dir;
    c.kv_tiers.disk_bytes = disk_dir.empty() ? 0 : int64_t{1} << 30;
    return c;
  }
  static std::vector<int32_t> prompt(uint32_t seed) { return random_prompt(257, seed); }  // 16 full blocks + 1

  static const EngineStats::KvTier* tier(const EngineStats& s, const std::string& name) {
    for (const auto& t : s.kv_tiers)
      if (t.name == name) return &t;
    return nullptr;
  }
};

TEST_F(KvTiersTest, EvictedPrefixComesBackFromMemoryThenFromDiskAfterRestart) {
  test::TempDir dir("kv-tiers-engine");
  auto reference = engine({.num_kv_blocks = 40, .enable_prefix_caching = false, .max_num_seqs = 4,
                           .max_model_len = 300});
  ASSERT_NE(reference, nullptr);
  const Generation recomputed = run_alone(*reference, prompt(1), greedy(8));

  {
    auto e = engine(config(int64_t{64} << 20, dir.path().string()));
    ASSERT_NE(e, nullptr);
    ASSERT_NE(e->kv_tiers(), nullptr);
    const Generation first = run_alone(*e, prompt(1), greedy(8));
    EXPECT_EQ(first.tokens, recomputed.tokens);
    // Four more distinct prompts push every block of the first out of the 40-block pool.
    for (uint32_t seed = 2; seed <= 5; ++seed) run_alone(*e, prompt(seed), greedy(8));
    const EngineStats mid = e->stats();
    ASSERT_NE(tier(mid, "memory"), nullptr);
    EXPECT_GT(tier(mid, "memory")->stats.demotions, 0);
    EXPECT_LE(tier(mid, "memory")->stats.bytes, tier(mid, "memory")->stats.capacity_bytes);

    const Generation again = run_alone(*e, prompt(1), greedy(8));
    EXPECT_EQ(again.metrics.num_cached_prompt_tokens, 256);
    EXPECT_EQ(again.tokens, recomputed.tokens);
    EXPECT_EQ(again.text, recomputed.text);
    const EngineStats after = e->stats();
    EXPECT_EQ(tier(after, "memory")->stats.promotions - tier(mid, "memory")->stats.promotions, 16);
    EXPECT_EQ(after.prefix_cache_tier_hit_blocks - mid.prefix_cache_tier_hit_blocks, 16);
  }  // destruction persists the pool and the memory tier to disk

  // A restart: a new engine over the same directory, no memory tier.
  auto e = engine(config(0, dir.path().string()));
  ASSERT_NE(e, nullptr);
  const EngineStats start = e->stats();
  ASSERT_NE(tier(start, "disk"), nullptr);
  EXPECT_GE(tier(start, "disk")->stats.blocks, 16);
  const Generation from_disk = run_alone(*e, prompt(1), greedy(8));
  EXPECT_EQ(from_disk.metrics.num_cached_prompt_tokens, 256);
  EXPECT_EQ(from_disk.tokens, recomputed.tokens);
  EXPECT_EQ(tier(e->stats(), "disk")->stats.promotions, 16);
}

TEST_F(KvTiersTest, TruncatedDiskFileIsSkippedAndRecomputed) {
  test::TempDir dir("kv-tiers-engine");
  { 
    auto e = engine(config(0, dir.path().string()));
    ASSERT_NE(e, nullptr);
    run_alone(*e, prompt(7), greedy(4));
  }
  // Truncate every block file: nothing may be trusted.
  int truncated = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir.path())) {
    if (f.path().extension() != ".kvb") continue;
    std::filesystem::resize_file(f.path(), kv::kDiskTierHeaderBytes + 10);
    ++truncated;
  }
  EXPECT_GE(truncated, 16);
  auto e = engine(config(0, dir.path().string()));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(tier(e->stats(), "disk")->stats.blocks, 0);
  EXPECT_EQ(tier(e->stats(), "disk")->stats.rejected, truncated);
  auto reference = engine({.num_kv_blocks = 40, .enable_prefix_caching = false, .max_num_seqs = 4,
                           .max_model_len = 300});
  const Generation g = run_alone(*e, prompt(7), greedy(4));
  EXPECT_EQ(g.metrics.num_cached_prompt_tokens, 0);
  EXPECT_EQ(g.tokens, run_alone(*reference, prompt(7), greedy(4)).tokens);
}

TEST_F(KvTiersTest, ClearPrefixCacheDropsEachTier) {
  test::TempDir dir("kv-tiers-engine");
  auto e = engine(config(int64_t{64} << 20, dir.path().string()));
  ASSERT_NE(e, nullptr);
  for (uint32_t seed = 20; seed <= 24; ++seed) run_alone(*e, prompt(seed), greedy(2));
  EXPECT_FALSE(e->clear_prefix_cache("bogus").ok());
  auto mem = e->clear_prefix_cache("memory");
  ASSERT_TRUE(mem.ok());
  EXPECT_GT(mem->memory_bytes, 0);
  EXPECT_EQ(mem->disk_bytes, 0);
  EXPECT_EQ(mem->pool_blocks, 0);
  EXPECT_EQ(tier(e->stats(), "memory")->stats.bytes, 0);
  auto all = e->clear_prefix_cache("all");
  ASSERT_TRUE(all.ok());
  EXPECT_GT(all->pool_blocks, 0);
  EXPECT_EQ(e->kv_manager().pool().num_cached(), 0);
  // Nothing cached anywhere: the first prompt is recomputed.
  EXPECT_EQ(run_alone(*e, prompt(20), greedy(2)).metrics.num_cached_prompt_tokens, 0);
}

TEST_F(KvTiersTest, BadTierConfigIsRefused) {
  EngineConfig c = config(0);
  c.kv_tiers.disk_dir = "/nonexistent-dir-for-test";
  c.kv_tiers.disk_bytes = 0;
  auto e = EngineCore::create(*loaded_->model, *loaded_->tokenizer, c);
  EXPECT_FALSE(e.ok());
  c.kv_tiers.disk_dir.clear();
  c.kv_tiers.memory_bytes = -1;
  EXPECT_FALSE(EngineCore::create(*loaded_->model, *loaded_->tokenizer, c).ok());
}

}  // namespace
}  // namespace cadenza::engine
