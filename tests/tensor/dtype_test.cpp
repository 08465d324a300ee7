// The dtype table against the block structs, and its lookups.
#include <gtest/gtest.h>

#include "tensor/blocks.h"
#include "tensor/dtype.h"

namespace cadenza {
namespace {

TEST(DType, TableMatchesBlockStructs) {
  struct Case {
    DType t;
    int64_t block_size;
    size_t bytes;
  };
  const Case cases[] = {
      {DType::Q4_0, kQK, sizeof(BlockQ4_0)}, {DType::Q4_1, kQK, sizeof(BlockQ4_1)},
      {DType::Q5_0, kQK, sizeof(BlockQ5_0)}, {DType::Q5_1, kQK, sizeof(BlockQ5_1)},
      {DType::Q8_0, kQK, sizeof(BlockQ8_0)}, {DType::Q8_1, kQK, sizeof(BlockQ8_1)},
      {DType::Q4_K, kQK_K, sizeof(BlockQ4_K)}, {DType::Q5_K, kQK_K, sizeof(BlockQ5_K)},
      {DType::Q6_K, kQK_K, sizeof(BlockQ6_K)}, {DType::Q8_K, kQK_K, sizeof(BlockQ8_K)},
      {DType::Q2_K, kQK_K, sizeof(BlockQ2_K)}, {DType::Q3_K, kQK_K, sizeof(BlockQ3_K)},
      {DType::IQ4_NL, kQK, sizeof(BlockIQ4_NL)}, {DType::IQ4_XS, kQK_K, sizeof(BlockIQ4_XS)},
      {DType::MXFP4, kQK, sizeof(BlockMXFP4)}, {DType::IQ2_XXS, kQK_K, sizeof(BlockIQ2_XXS)},
      {DType::IQ2_XS, kQK_K, sizeof(BlockIQ2_XS)}, {DType::IQ2_S, kQK_K, sizeof(BlockIQ2_S)},
      {DType::IQ3_XXS, kQK_K, sizeof(BlockIQ3_XXS)}, {DType::IQ3_S, kQK_K, sizeof(BlockIQ3_S)},
      {DType::IQ1_S, kQK_K, sizeof(BlockIQ1_S)}, {DType::IQ1_M, kQK_K, sizeof(BlockIQ1_M)},
      {DType::F32, 1, 4}, {DType::F16, 1, 2}, {DType::BF16, 1, 2},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(traits(c.t).block_size, c.block_size) << dtype_name(c.t);
    EXPECT_EQ(traits(c.t).type_size, c.bytes) << dtype_name(c.t);
  }
}

// Names as llama.cpp prints them, and which types the CPU backend can load.
TEST(DType, LowBitTypesNamedAndSupported) {
  struct Case {
    DType t;
    uint32_t id;
    const char* name;
  };
  const Case cases[] = {
      {DType::Q2_K, 10, "q2_K"},     {DType::Q3_K, 11, "q3_K"},     {DType::IQ2_XXS, 16, "iq2_xxs"},
      {DType::IQ2_XS, 17, "iq2_xs"}, {DType::IQ3_XXS, 18, "iq3_xxs"}, {DType::IQ1_S, 19, "iq1_s"},
      {DType::IQ4_NL, 20, "iq4_nl"}, {DType::IQ3_S, 21, "iq3_s"},   {DType::IQ2_S, 22, "iq2_s"},
      {DType::IQ4_XS, 23, "iq4_xs"}, {DType::IQ1_M, 29, "iq1_m"},   {DType::MXFP4, 39, "mxfp4"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(static_cast<uint32_t>(c.t), c.id);
    const auto tr = dtype_traits(c.id);
    ASSERT_TRUE(tr.has_value()) << c.name;
    EXPECT_EQ(tr->name, c.name);
    EXPECT_TRUE(tr->compute_supported) << c.name;
    EXPECT_EQ(dtype_from_name(c.name), c.t);
  }
  EXPECT_EQ(traits(DType::MXFP4).block_size, 32);
  EXPECT_EQ(traits(DType::MXFP4).type_size, 1u + 16u);  // E8M0 scale, 32 E2M1 nibbles
  EXPECT_EQ(dtype_from_name("MXFP4"), DType::MXFP4);
  EXPECT_FALSE(traits(DType::TQ1_0).compute_supported);
  EXPECT_FALSE(dtype_traits(38).has_value());
}

// Sizes of the types we do not implement, from their block definitions (bytes per 256 elements):
// a wrong entry would make the GGUF reader compute wrong tensor extents.
TEST(DType, OtherTypeSizes) {
  EXPECT_EQ(traits(DType::Q2_K).type_size, 2u + 2u + 16u + 64u);      // d, dmin, scales, 2-bit qs
  EXPECT_EQ(traits(DType::Q3_K).type_size, 32u + 64u + 12u + 2u);     // hmask, qs, scales, d
  EXPECT_EQ(traits(DType::IQ2_XXS).type_size, 2u + 64u);
  EXPECT_EQ(traits(DType::IQ2_XS).type_size, 2u + 64u + 8u);
  EXPECT_EQ(traits(DType::IQ3_XXS).type_size, 2u + 96u);
  EXPECT_EQ(traits(DType::IQ1_S).type_size, 2u + 32u + 16u);
  EXPECT_EQ(traits(DType::IQ4_NL).type_size, 2u + 16u);  // 32-element block
  EXPECT_EQ(traits(DType::IQ4_NL).block_size, 32);
  EXPECT_EQ(traits(DType::IQ3_S).type_size, 2u + 64u + 8u + 32u + 4u);
  EXPECT_EQ(traits(DType::IQ2_S).type_size, 2u + 64u + 8u + 8u);
  EXPECT_EQ(traits(DType::IQ4_XS).type_size, 2u + 2u + 4u + 128u);
  EXPECT_EQ(traits(DType::IQ1_M).type_size, 32u + 16u + 8u);
  EXPECT_EQ(traits(DType::TQ1_0).type_size, 48u + 4u + 2u);
  EXPECT_EQ(traits(DType::TQ2_0).type_size, 64u + 2u);
  EXPECT_EQ(traits(DType::I8).type_size, 1u);
  EXPECT_EQ(traits(DType::I64).type_size, 8u);
  EXPECT_EQ(traits(DType::F64).type_size, 8u);
}

TEST(DType, LookupsAndRowBytes) {
  EXPECT_FALSE(dtype_traits(4).has_value());  // removed Q4_2
  EXPECT_FALSE(dtype_traits(31).has_value());
  EXPECT_FALSE(dtype_traits(1000).has_value());
  EXPECT_EQ(dtype_from_name("Q4_k"), DType::Q4_K);
  EXPECT_EQ(dtype_from_name("bf16"), DType::BF16);
  EXPECT_FALSE(dtype_from_name("q4").has_value());
  EXPECT_EQ(row_bytes(DType::Q4_K, 4096), 16u * 144u);
  EXPECT_EQ(row_bytes(DType::F16, 3), 6u);
  EXPECT_FALSE(row_bytes(DType::Q8_0, 33).has_value());
  EXPECT_FALSE(row_bytes(DType::Q8_0, -32).has_value());
  EXPECT_FALSE(row_bytes(DType::F32, int64_t{1} << 62).has_value());  // overflows uint64
}

}  // namespace
}  // namespace cadenza
