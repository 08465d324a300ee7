#include "kv/kv_sizing.h"

#include <gtest/gtest.h>

namespace cadenza::kv {
namespace {

// Qwen2.5-0.5B: 24 layers, 2 KV heads, head_dim 64 (the README's worked example).
KvShape qwen05(KvElementType type) { return KvShape{24, 2, 64, 64, type, 16}; }

struct SizingCase {
  KvElementType type;
  int64_t per_token;
  int64_t per_block;
  int32_t blocks_per_gib;
};

TEST(KvSizing, Qwen25HalfBillionShape) {
  const SizingCase cases[] = {
      {KvElementType::kF32, 24 * 2 * 2 * 64 * 4, 24 * 2 * 2 * 64 * 4 * 16, 2730},
      {KvElementType::kF16, 12288, 196608, 5461},          // 12 KiB per token, 192 KiB per block
      {KvElementType::kQ8_0, 24 * 2 * 2 * 68, 104448, 10280},  // 64 values = 2 blocks of 34 bytes
  };
  for (const SizingCase& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.type));
    EXPECT_EQ(*kv_bytes_per_token(qwen05(c.type)), c.per_token);
    EXPECT_EQ(*kv_bytes_per_block(qwen05(c.type)), c.per_block);
    EXPECT_EQ(*kv_num_blocks_for_budget(qwen05(c.type), int64_t{1} << 30), c.blocks_per_gib);
  }
}

// Sequences of 1,000 tokens per GiB (src/kv/README.md's table): 63 blocks of 16 each, so the
// blocks per GiB above divided by 63, rounded down; q8 holds 3.8x as many as f32.
TEST(KvSizing, SequencesPerGibFollowTheElementType) {
  const int64_t gib = int64_t{1} << 30;
  EXPECT_EQ(*kv_sequences_for_budget(qwen05(KvElementType::kF32), gib, 1000), 2730 / 63);
  EXPECT_EQ(*kv_sequences_for_budget(qwen05(KvElementType::kF16), gib, 1000), 5461 / 63);
  EXPECT_EQ(*kv_sequences_for_budget(qwen05(KvElementType::kQ8_0), gib, 1000), 10280 / 63);
  // A 1,008-token sequence still fits 63 blocks; 1,009 tokens need a 64th.
  EXPECT_EQ(*kv_sequences_for_budget(qwen05(KvElementType::kF16), gib, 1008), 5461 / 63);
  EXPECT_EQ(*kv_sequences_for_budget(qwen05(KvElementType::kF16), gib, 1009), 5461 / 64);
  EXPECT_FALSE(kv_sequences_for_budget(qwen05(KvElementType::kF16), gib, 0).ok());
  EXPECT_FALSE(kv_sequences_for_budget(qwen05(KvElementType::kF16), -1, 1000).ok());
  EXPECT_FALSE(kv_sequences_for_budget(KvShape{24, 2, 48, 48, KvElementType::kQ8_0, 16}, gib, 1000).ok());
}

TEST(KvSizing, RejectsBadShapesAndRoundsDown) {
  EXPECT_FALSE(kv_bytes_per_block(KvShape{24, 2, 48, 48, KvElementType::kQ8_0, 16}).ok());
  EXPECT_FALSE(kv_bytes_per_block(KvShape{0, 2, 64, 64, KvElementType::kF16, 16}).ok());
  EXPECT_FALSE(kv_bytes_per_block(KvShape{24, 2, 64, 64, KvElementType::kF16, 0}).ok());
  EXPECT_FALSE(kv_num_blocks_for_budget(qwen05(KvElementType::kF16), -1).ok());
  EXPECT_EQ(*kv_num_blocks_for_budget(qwen05(KvElementType::kF16), 196607), 0);
  EXPECT_EQ(*kv_num_blocks_for_budget(qwen05(KvElementType::kF16), 196608 * 3 + 5), 3);
  // Different key and value head dims (e.g. MLA-like shapes) add up separately.
  EXPECT_EQ(*kv_bytes_per_token(KvShape{1, 1, 192, 128, KvElementType::kF16, 16}), (192 + 128) * 2);
}

}  // namespace
}  // namespace cadenza::kv
