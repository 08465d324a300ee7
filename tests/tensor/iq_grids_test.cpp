// The IQ lookup tables against entries of the format's published tables (as the 64-bit / 32-bit
// words they are listed as, lowest byte = first coordinate), plus structural checks: every
// point distinct, coordinates from the documented value sets, the sign table's parity rule.
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/iq_grids.h"

namespace cadenza::iq {
namespace {

template <int N, int D, typename T>
uint64_t word(const Grid<N, D, T>& g, int i) {
  uint64_t w = 0;
  for (int t = 0; t < D; ++t) w |= static_cast<uint64_t>(static_cast<uint8_t>(g.v[i][t])) << (8 * t);
  return w;
}

template <int N, int D, typename T>
void expect_distinct(const Grid<N, D, T>& g, std::set<int> allowed) {
  std::set<uint64_t> seen;
  for (int i = 0; i < N; ++i) {
    seen.insert(word(g, i));
    for (int t = 0; t < D; ++t) EXPECT_TRUE(allowed.count(g.v[i][t])) << "point " << i;
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(N));
}

TEST(IqGrids, PublishedEntries) {
  EXPECT_EQ(word(kIq2xxs, 0), 0x0808080808080808u);
  EXPECT_EQ(word(kIq2xxs, 1), 0x080808080808082bu);
  EXPECT_EQ(word(kIq2xxs, 100), 0x08192b0808081908u);
  EXPECT_EQ(word(kIq2xxs, 255), 0x2b2b2b1908081908u);
  EXPECT_EQ(word(kIq2xs, 100), 0x0808192b08081908u);
  EXPECT_EQ(word(kIq2xs, 300), 0x1908190808191908u);
  EXPECT_EQ(word(kIq2xs, 511), 0x2b2b2b2b2b2b2b2bu);
  EXPECT_EQ(word(kIq2s, 144), 0x0808192b08081908u);
  EXPECT_EQ(word(kIq2s, 513), 0x1908081919080819u);
  EXPECT_EQ(word(kIq2s, 1023), 0x2b2b2b2b2b2b2b2bu);
  EXPECT_EQ(word(kIq3xxs, 1), 0x04040414u);
  EXPECT_EQ(word(kIq3xxs, 17), 0x040c142cu);
  EXPECT_EQ(word(kIq3xxs, 63), 0x0c04141cu);
  EXPECT_EQ(word(kIq3xxs, 127), 0x141c0c24u);
  EXPECT_EQ(word(kIq3xxs, 255), 0x3e341c04u);
  EXPECT_EQ(word(kIq3s, 1), 0x01010103u);
  EXPECT_EQ(word(kIq3s, 300), 0x07030503u);
  EXPECT_EQ(word(kIq3s, 400), 0x090f0907u);
  EXPECT_EQ(word(kIq3s, 511), 0x0f0f0101u);
  EXPECT_EQ(word(kIq1s, 0), 0xffffffffffffffffu);
  EXPECT_EQ(word(kIq1s, 1), 0xffffffffffffff01u);
  EXPECT_EQ(word(kIq1s, 998), 0x00000000ffffff00u);
  EXPECT_EQ(word(kIq1s, 1234), 0x0001ff00ff01ff01u);
  EXPECT_EQ(word(kIq1s, 2047), 0x0101010101010101u);
}

TEST(IqGrids, PointsDistinctWithDocumentedValues) {
  expect_distinct(kIq2xxs, {8, 25, 43});
  expect_distinct(kIq2xs, {8, 25, 43});
  expect_distinct(kIq2s, {8, 25, 43});
  expect_distinct(kIq3xxs, {4, 12, 20, 28, 36, 44, 52, 62});
  expect_distinct(kIq3s, {1, 3, 5, 7, 9, 11, 13, 15});
  expect_distinct(kIq1s, {-1, 0, 1});
}

TEST(IqGrids, SignTable) {
  EXPECT_EQ(kSigns.v[0], 0x00);
  EXPECT_EQ(kSigns.v[1], 0x81);
  EXPECT_EQ(kSigns.v[3], 0x03);
  EXPECT_EQ(kSigns.v[127], 0xFF);
  for (int s = 0; s < 128; ++s) {
    EXPECT_EQ(kSigns.v[s] & 0x7F, s);
    EXPECT_EQ(__builtin_popcount(kSigns.v[s]) % 2, 0) << s;
  }
}

}  // namespace
}  // namespace cadenza::iq
