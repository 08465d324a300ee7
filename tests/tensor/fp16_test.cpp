// fp16 / bf16 conversions: exhaustive on the 16-bit side, structured sweeps on the 32-bit side,
// checked against the definition of round-to-nearest-even (and against the compiler's _Float16
// where it exists) rather than against a second copy of the bit tricks.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "tensor/quant.h"

namespace cadenza {
namespace {

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }
float float_of(uint32_t b) { return std::bit_cast<float>(b); }

// Checks that r is the correctly rounded (nearest, ties to even) 16-bit encoding of finite f,
// given the format's decoder and its largest finite magnitude pattern.
::testing::AssertionResult is_nearest_even(float f, uint16_t r, float (*decode)(uint16_t),
                                           uint16_t max_finite) {
  const uint16_t mag = r & 0x7FFF;
  if (mag > max_finite)
    return ::testing::AssertionFailure() << "finite " << f << " encoded as non-finite 0x" << std::hex << r;
  const double x = f;
  const double err = std::fabs(x - decode(r));
  // The neighbours of r in magnitude, same sign (for mag == 0, the other-signed zero is equal).
  for (int delta : {-1, 1}) {
    const int nm = mag + delta;
    if (nm < 0 || nm > max_finite) continue;
    const auto n = static_cast<uint16_t>((r & 0x8000) | nm);
    const double nerr = std::fabs(x - decode(n));
    if (nerr < err || (nerr == err && (r & 1)))
      return ::testing::AssertionFailure()
             << "f=" << f << " (0x" << std::hex << bits_of(f) << ") -> 0x" << r << " but 0x" << n
             << " is nearer or an even tie";
  }
  return ::testing::AssertionSuccess();
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp16_to_fp32(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));
  EXPECT_EQ(fp16_to_fp32(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xC000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);  // 2^-2 * (1 + 0x155/1024)
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(fp16_to_fp32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_fp32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7E00)));

  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7BFF);  // just below the tie with 2^16
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);    // the tie rounds to even = infinity
  EXPECT_EQ(fp32_to_fp16(-1e10f), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24 -> 0
  EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);  // tie between 1 and 2 ulps -> 2
  EXPECT_EQ(fp32_to_fp16(1e-30f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  // Rounding carries out of the subnormal range into the smallest normal.
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.5f, -24)), 0x0400);
}

TEST(Fp16, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    ASSERT_EQ(std::isnan(f), is_nan) << std::hex << h;
    ASSERT_EQ(fp32_to_fp16(f), h) << "half 0x" << std::hex << h << " -> " << f;
  }
}

TEST(Fp16, HalfwayValuesRoundToEven) {
  // Between two adjacent finite halves h and h+1 (same sign), the exact midpoint (representable
  // in float: one more bit than a half needs) must go to the even one, and the floats just either
  // side of it to the nearer one. h = 0x7BFF's upper neighbour is 2^16 -> infinity (0x7C00).
  for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
    for (uint32_t m = 0; m < 0x7BFF + 1; ++m) {
      const auto lo = static_cast<uint16_t>(sign | m);
      const auto hi = static_cast<uint16_t>(sign | (m + 1));
      const float flo = fp16_to_fp32(lo);
      const float fhi = m + 1 == 0x7C00 ? (sign ? -65536.0f : 65536.0f) : fp16_to_fp32(hi);
      const float mid = (flo + fhi) / 2;
      ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(flo) + fhi) / 2) << m;
      ASSERT_EQ(fp32_to_fp16(mid), (m & 1) ? hi : lo) << std::hex << "mid of 0x" << lo;
      ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, flo)), lo) << std::hex << "below mid of 0x" << lo;
      ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, fhi)), hi) << std::hex << "above mid of 0x" << lo;
    }
  }
}

// Floats whose dropped bits sit at and around every rounding boundary of a normal half, plus
// random floats of every exponent (subnormal halves drop a varying number of bits).
template <typename Fn>
void for_float_sweep(int low_bits, Fn&& fn) {
  const uint32_t half = 1u << (low_bits - 1);
  const uint32_t lows[] = {0, 1, half - 1, half, half + 1, (1u << low_bits) - 1};
  for (uint32_t top = 0; top < (1u << (32 - low_bits)); ++top)
    for (uint32_t low : lows) fn(float_of((top << low_bits) | low));
  std::mt19937 rng(12345);  // fixed: a reproducible sweep, not a statistical test
  for (int i = 0; i < (1 << 20); ++i) fn(float_of(static_cast<uint32_t>(rng())));
}

TEST(Fp16, FloatSweepIsCorrectlyRounded) {
  for_float_sweep(13, [](float f) {
    const uint16_t r = fp32_to_fp16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(fp16_to_fp32(r))) << std::hex << bits_of(f);
      return;
    }
#if defined(__FLT16_MANT_DIG__)
    // The compiler's conversion (libgcc soft-float or F16C) as an independent oracle.
    const auto oracle = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    ASSERT_EQ(r, oracle) << "f bits 0x" << std::hex << bits_of(f);
#endif
    if (std::fabs(f) < 65504.0f) {
      ASSERT_TRUE(is_nearest_even(f, r, fp16_to_fp32, 0x7BFF));
    } else {
      ASSERT_EQ(r & 0x7FFF, std::fabs(f) >= 65520.0f ? 0x7C00 : 0x7BFF) << f;
    }
  });
}

TEST(Bf16, KnownValues) {
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xC040), -3.0f);
  EXPECT_EQ(bf16_to_fp32(0x7F7F), float_of(0x7F7F0000u));  // largest finite
  EXPECT_EQ(bf16_to_fp32(0x0001), float_of(0x00010000u));  // subnormal
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(float_of(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(fp32_to_bf16(float_of(0x3F818000u)), 0x3F82);  // tie, odd goes up
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to infinity
  EXPECT_EQ(fp32_to_bf16(float_of(0x7F7F7FFFu)), 0x7F7F);
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(fp32_to_bf16(float_of(0x00008000u)), 0x0000);  // subnormal tie -> even 0
  // A NaN whose payload lives only in the dropped bits must not turn into infinity.
  const uint16_t nan = fp32_to_bf16(float_of(0x7F800001u));
  EXPECT_TRUE(std::isnan(bf16_to_fp32(nan)));
}

TEST(Bf16, EveryBf16RoundTripsExactly) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    ASSERT_EQ(bits_of(f), h << 16);
    ASSERT_EQ(fp32_to_bf16(f), h) << std::hex << h;
  }
}

TEST(Bf16, HalfwayValuesRoundToEven) {
  // bf16 is a truncated float, so the midpoint of b and b+1 is the float with bits b<<16 | 0x8000
  // (also across a binade step, where the spacing of b's binade applies).
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    if ((b & 0x7F80) == 0x7F80) continue;  // inf / NaN
    const uint32_t mid = (b << 16) | 0x8000u;
    const auto up = static_cast<uint16_t>(b + 1);  // magnitude up; 0x7F7F -> 0x7F80 = inf
    ASSERT_EQ(fp32_to_bf16(float_of(mid)), (b & 1) ? up : b) << std::hex << b;
    ASSERT_EQ(fp32_to_bf16(float_of(mid - 1)), b) << std::hex << b;
    ASSERT_EQ(fp32_to_bf16(float_of(mid + 1)), up) << std::hex << b;
  }
}

TEST(Bf16, FloatSweepIsCorrectlyRounded) {
  const float max_bf16 = float_of(0x7F7F0000u);
  for_float_sweep(16, [&](float f) {
    const uint16_t r = fp32_to_bf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_fp32(r))) << std::hex << bits_of(f);
    } else if (std::fabs(f) <= max_bf16) {
      ASSERT_TRUE(is_nearest_even(f, r, bf16_to_fp32, 0x7F7F));
    } else {  // above the largest bf16: the tie with 2^128 is at 0x7F7F8000
      ASSERT_EQ(r & 0x7FFF, (bits_of(f) & 0x7FFFFFFFu) >= 0x7F7F8000u ? 0x7F80 : 0x7F7F);
    }
  });
}

}  // namespace
}  // namespace cadenza
