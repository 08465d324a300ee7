// IEEE binary16 and bfloat16 <-> binary32 conversions, done on the bit patterns so that the
// result does not depend on the CPU (F16C) or the compiler's _Float16 support, and so that NaN
// payloads survive a round trip (the tests check all 65536 patterns).
#include <bit>
#include <cstdint>

#include "tensor/quant.h"

namespace cadenza {

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);  // inf, or NaN with its payload kept
  } else if (exp != 0) {
    bits = sign | ((exp + (127 - 15)) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;  // +-0
  } else {
    // Subnormal half: man * 2^-24. Shift the leading 1 up to the implicit-bit position (bit 10);
    // each shift lowers the exponent by one below the smallest normal's 2^-14.
    int shifts = 0;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      ++shifts;
    }
    bits = sign | (static_cast<uint32_t>(127 - 14 - shifts) << 23) | ((man & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7FFFFFFFu;

  if (abs > 0x7F800000u) {
    // NaN: keep the top 10 payload bits (this includes the quiet bit); if they are all zero the
    // result would read as infinity, so force a quiet NaN instead.
    uint16_t man = static_cast<uint16_t>((abs >> 13) & 0x3FFu);
    if (man == 0) man = 0x200;
    return sign | 0x7C00u | man;
  }
  // 65520 = halfway between 65504 (largest half, odd mantissa) and 2^16: ties to even go up, so
  // everything from 65520 on (infinity included) becomes infinity.
  if (abs >= 0x477FF000u) return sign | 0x7C00u;

  if (abs >= 0x38800000u) {  // >= 2^-14: normal half
    // Rebias the exponent, then round the 13 dropped mantissa bits to nearest even. A carry out
    // of the mantissa correctly bumps the exponent (and cannot reach infinity: checked above).
    const uint32_t rebased = abs - ((127u - 15u) << 23);
    const uint32_t rounded = rebased + 0xFFFu + ((rebased >> 13) & 1u);
    return sign | static_cast<uint16_t>(rounded >> 13);
  }

  // Subnormal (or zero) half: result = round_even(f * 2^24), computed from the 24-bit
  // significand. Below 2^-25 (exponent field < 102) everything rounds to zero; exactly 2^-25
  // is a tie that goes to the even 0, handled by the general path.
  const uint32_t exp = abs >> 23;
  if (exp < 102) return sign;
  const uint32_t sig = (abs & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126 - exp;  // 14 .. 24
  uint32_t q = sig >> shift;
  const uint32_t rem = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // q == 0x400 is the smallest normal: fine
  return sign | static_cast<uint16_t>(q);
}

float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    // NaN: truncate (keeps the payload's top 7 bits); quiet it only when truncation would
    // otherwise leave an infinity.
    auto r = static_cast<uint16_t>(bits >> 16);
    if ((r & 0x7Fu) == 0) r |= 0x40u;
    return r;
  }
  // Round to nearest even on the 16 dropped bits; overflow carries into infinity as IEEE wants.
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace cadenza
