// Hand-built blocks of the low-bit types (Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4 and the grid types):
// raw bytes at explicit offsets (not through blocks.h's structs) decode to values worked out by
// hand from the layout documented in tensor/blocks.h, with grid points taken from the format's
// published tables (written below as the 64/32-bit words those tables list, lowest byte =
// first coordinate). Also MXFP4's E8M0/E2M1 edge cases and a few hand-checked MXFP4 encodings.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/dtype.h"
#include "tensor/quant.h"

namespace cadenza {
namespace {

constexpr uint16_t kH0_5 = 0x3800, kH1 = 0x3C00, kH2 = 0x4000;

void put16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v & 0xFF);
  b[off + 1] = static_cast<uint8_t>(v >> 8);
}
void put32(std::vector<uint8_t>& b, size_t off, uint32_t v) {
  for (int k = 0; k < 4; ++k) b[off + k] = static_cast<uint8_t>(v >> (8 * k));
}

std::vector<float> decode(DType t, const std::vector<uint8_t>& bytes) {
  const int64_t n = traits(t).block_size;
  EXPECT_EQ(bytes.size(), traits(t).type_size);
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(t, bytes.data(), y.data(), n);
  std::vector<uint8_t> shifted(bytes.size() + 1);  // one byte off alignment: same values
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  std::vector<float> y2(static_cast<size_t>(n));
  dequantize_row(t, shifted.data() + 1, y2.data(), n);
  EXPECT_EQ(y, y2) << "decoding depends on alignment";
  return y;
}

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(QuantLayoutLow, Q2_K) {
  // scales[j] = j | (15 - j) << 4: sc = j, mn = 15 - j; d = 1, dmin = 0.5. Every qs byte 0xE4
  // gives q = g (its four 2-bit fields are 0, 1, 2, 3), except byte 37 = 0x1B (3, 2, 1, 0).
  std::vector<uint8_t> b(84);
  for (int j = 0; j < 16; ++j) b[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  for (int i = 0; i < 64; ++i) b[16 + i] = 0xE4;
  b[16 + 37] = 0x1B;
  put16(b, 80, kH1);
  put16(b, 82, kH0_5);
  const auto y = decode(DType::Q2_K, b);
  EXPECT_EQ(y[0], -7.5f);    // j 0, q 0: 0 - 0.5 * 15
  EXPECT_EQ(y[40], -4.5f);   // j 2, g 1: 2 * 1 - 0.5 * 13
  EXPECT_EQ(y[200], 22.5f);  // j 12, g 2: 12 * 2 - 0.5 * 3
  EXPECT_EQ(y[255], 45.0f);  // j 15, g 3: 15 * 3 - 0
  EXPECT_EQ(y[133], 20.5f);  // byte 37 (half 1, l 5), g 0 -> q 3; j 8: 24 - 3.5
  EXPECT_EQ(y[229], -0.5f);  // byte 37, g 3 -> q 0; j 14: 0 - 0.5
}

TEST(QuantLayoutLow, Q3_K) {
  // Low nibbles: scales[0..7] = 0x21 (sc[j < 8] low 1, sc[j >= 8] low 2); high pairs: scales[8..11]
  // = 0xE4 (sc[j] high = j / 4). So sc = 1, 17, 34, 50 for j / 4 = 0..3, i.e. -31, -15, 2, 18.
  // qs all 0xE4 (low2 = g); hmask[l] = 0x0F: high bit set for elements < 128 (q = low2), clear
  // above (q = low2 - 4), except hmask[3] = 0xFF. d = 0.5.
  std::vector<uint8_t> b(110);
  for (int l = 0; l < 32; ++l) b[l] = 0x0F;
  b[3] = 0xFF;
  for (int i = 0; i < 64; ++i) b[32 + i] = 0xE4;
  for (int j = 0; j < 8; ++j) b[96 + j] = 0x21;
  for (int j = 0; j < 4; ++j) b[104 + j] = 0xE4;
  put16(b, 108, kH0_5);
  const auto y = decode(DType::Q3_K, b);
  EXPECT_EQ(y[32], -15.5f);  // j 2 (-31), g 1, q 1
  EXPECT_EQ(y[70], -15.0f);  // j 4 (-15), g 2, q 2
  EXPECT_EQ(y[130], -4.0f);  // j 8 (2), g 0, high clear: q -4
  EXPECT_EQ(y[250], -9.0f);  // j 15 (18), g 3: q 3 - 4 = -1
  EXPECT_EQ(y[131], 0.0f);   // hmask[3] bit 4 set: q 0
  EXPECT_EQ(y[227], 27.0f);  // hmask[3] bit 7 set, j 14 (18), g 3: q 3
}

TEST(QuantLayoutLow, IQ4_NL) {
  std::vector<uint8_t> b(18);
  put16(b, 0, kH2);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(DType::IQ4_NL, b);
  EXPECT_EQ(y[0], -254.0f);  // 2 * -127
  EXPECT_EQ(y[5], -70.0f);   // 2 * -35
  EXPECT_EQ(y[16], 226.0f);  // code 15: 2 * 113
  EXPECT_EQ(y[20], 76.0f);   // qs[4] >> 4 = 11: 2 * 38
  EXPECT_EQ(y[31], -254.0f);
}

TEST(QuantLayoutLow, IQ4_XS) {
  // Low nibbles 1..8 for sub-blocks 0..7; scales_h = 0xC006: high pairs 2 (j 0), 1 (j 1), 0, ...,
  // 3 (j 7). ls - 32: j 0 -> 1, j 1 -> -14, j 2 -> -29, j 7 -> 24. qs[16j + l] = l | (15 - l) << 4.
  std::vector<uint8_t> b(136);
  put16(b, 0, kH0_5);
  put16(b, 2, 0xC006);
  b[4] = 0x21, b[5] = 0x43, b[6] = 0x65, b[7] = 0x87;
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 16; ++l) b[8 + 16 * j + l] = static_cast<uint8_t>(l | ((15 - l) << 4));
  const auto y = decode(DType::IQ4_XS, b);
  EXPECT_EQ(y[0], -63.5f);             // 0.5 * 1 * -127
  EXPECT_EQ(y[32 + 3], 455.0f);        // 0.5 * -14 * kv[3] = -7 * -65
  EXPECT_EQ(y[32 * 7 + 18], 828.0f);   // 0.5 * 24 * kv[13] = 12 * 69
  EXPECT_EQ(y[32 * 2 + 20], -551.0f);  // 0.5 * -29 * kv[11] = -14.5 * 38
}

TEST(QuantLayoutLow, MXFP4Values) {
  // e = 127: scale 1, so element j is the E2M1 value of its code.
  std::vector<uint8_t> b(17);
  b[0] = 127;
  for (int j = 0; j < 16; ++j) b[1 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(DType::MXFP4, b);
  const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], e2m1[j]) << j;
    EXPECT_EQ(y[j + 16], e2m1[15 - j]) << j;
  }
}

TEST(QuantLayoutLow, MXFP4ScaleEdges) {
  // Codes 1 (0.5), 2 (1.0), 7 (6.0) and 9 (-0.5) under extreme exponents; expected floats as
  // bit patterns.
  auto block = [](uint8_t e) {
    std::vector<uint8_t> b(17);
    b[0] = e;
    b[1] = 0x01 | 0x20;  // element 0: code 1, element 16: code 2
    b[2] = 0x07 | 0x90;  // element 1: code 7, element 17: code 9
    return b;
  };
  auto y = decode(DType::MXFP4, block(0));   // scale 2^-127
  EXPECT_EQ(y[0], bits_to_float(0x00200000));    // 2^-128, subnormal
  EXPECT_EQ(y[16], bits_to_float(0x00400000));   // 2^-127, subnormal
  EXPECT_EQ(y[1], bits_to_float(0x01400000));    // 6 * 2^-127 = 1.5 * 2^-125
  EXPECT_EQ(y[17], bits_to_float(0x80200000));   // -2^-128
  EXPECT_EQ(y[2], 0.0f);
  y = decode(DType::MXFP4, block(1));        // 2^-126
  EXPECT_EQ(y[0], bits_to_float(0x00400000));
  EXPECT_EQ(y[16], bits_to_float(0x00800000));   // 2^-126, the smallest normal
  y = decode(DType::MXFP4, block(254));      // 2^127
  EXPECT_EQ(y[0], bits_to_float(0x7E800000));    // 2^126
  EXPECT_EQ(y[16], bits_to_float(0x7F000000));   // 2^127
  EXPECT_TRUE(std::isinf(y[1]) && y[1] > 0);      // 6 * 2^127 overflows
  y = decode(DType::MXFP4, block(255));      // decoded as 2^128 (OCP's NaN code)
  EXPECT_EQ(y[0], bits_to_float(0x7F000000));    // 2^127
  EXPECT_TRUE(std::isinf(y[16]));
  EXPECT_EQ(y[17], bits_to_float(0xFF000000));   // -2^127
}

TEST(QuantLayoutLow, MXFP4Encoding) {
  // Block max 6: exponent 127 (scale 1) fits it exactly. Ties go to the even code.
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f, x[1] = -3.0f, x[2] = 0.25f, x[3] = 0.75f, x[4] = 5.0f, x[5] = -1.25f;
  x[6] = 1.7f, x[7] = -0.2f, x[16] = 2.4f;
  std::vector<uint8_t> q(17);
  quantize_row(DType::MXFP4, x.data(), q.data(), 32);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1] & 0xF, 7);    // 6
  EXPECT_EQ(q[2] & 0xF, 13);   // -3: sign | code 5
  EXPECT_EQ(q[3] & 0xF, 0);    // 0.25: tie between 0 and 0.5 -> 0 (even)
  EXPECT_EQ(q[4] & 0xF, 2);    // 0.75: tie between 0.5 and 1 -> 1 (even)
  EXPECT_EQ(q[5] & 0xF, 6);    // 5: tie between 4 and 6 -> 4 (even)
  EXPECT_EQ(q[6] & 0xF, 10);   // -1.25: tie between 1 and 1.5 -> -1 (even)
  EXPECT_EQ(q[7] & 0xF, 3);    // 1.7 -> 1.5
  EXPECT_EQ(q[8] & 0xF, 0);    // -0.2 -> 0
  EXPECT_EQ(q[1] >> 4, 4);     // element 16: 2.4 -> 2
  // A max of 1000 needs scale 2^8 (1000 / 256 = 3.9 -> 4); one exponent lower would clip it to
  // 6 * 128 = 768, a larger error.
  std::fill(x.begin(), x.end(), 0.0f);
  x[0] = 1000.0f;
  quantize_row(DType::MXFP4, x.data(), q.data(), 32);
  std::vector<float> y(32);
  dequantize_row(DType::MXFP4, q.data(), y.data(), 32);
  EXPECT_EQ(q[0], 135);
  EXPECT_EQ(y[0], 1024.0f);
  EXPECT_EQ(y[1], 0.0f);
}

TEST(QuantLayoutLow, IQ2_XXS) {
  // Sub-block 0: grid indices 0, 1, 255, 100; sign indices 0, 1 (-> 0x81), 3 (0x03), 127 (0xFF);
  // scale 5: db = 1 * 5.5 * 0.25 = 1.375. The other sub-blocks are zero bytes: grid 0, no signs,
  // db = 0.125, so every element decodes to 8 * 0.125 = 1.
  //   grid 1   = 0x080808080808082b    grid 255 = 0x2b2b2b1908081908
  //   grid 100 = 0x08192b0808081908
  std::vector<uint8_t> b(66);
  put16(b, 0, kH1);
  b[2] = 0, b[3] = 1, b[4] = 255, b[5] = 100;
  put32(b, 6, 0u | (1u << 7) | (3u << 14) | (127u << 21) | (5u << 28));
  const auto y = decode(DType::IQ2_XXS, b);
  EXPECT_EQ(y[0], 11.0f);       // 8 * 1.375
  EXPECT_EQ(y[8], -59.125f);    // group 1: 43, negative
  EXPECT_EQ(y[9], 11.0f);
  EXPECT_EQ(y[15], -11.0f);     // bit 7 of 0x81
  EXPECT_EQ(y[16], -11.0f);     // group 2: 0x08, negative
  EXPECT_EQ(y[17], -34.375f);   // 0x19 = 25, negative
  EXPECT_EQ(y[18], 11.0f);
  EXPECT_EQ(y[21], 59.125f);
  EXPECT_EQ(y[24], -11.0f);     // group 3: all negative
  EXPECT_EQ(y[25], -34.375f);
  EXPECT_EQ(y[29], -59.125f);
  EXPECT_EQ(y[100], 1.0f);
  EXPECT_EQ(y[255], 1.0f);
}

TEST(QuantLayoutLow, IQ2_XS) {
  // Sub-block 0: word 0 = index 511 (all 0x2b) | sign index 1 << 9 (0x81); word 2 = index 300
  // (0x1908190808191908); scales[0] = 0x31: db = 2 * 1.5 * 0.25 = 0.75 for groups 0-1, 2 * 3.5 *
  // 0.25 = 1.75 for groups 2-3. Sub-block 1: scale 0, db = 0.25.
  std::vector<uint8_t> b(74);
  put16(b, 0, kH2);
  put16(b, 2, static_cast<uint16_t>(511 | (1 << 9)));
  put16(b, 6, 300);
  b[66] = 0x31;
  const auto y = decode(DType::IQ2_XS, b);
  EXPECT_EQ(y[0], -32.25f);
  EXPECT_EQ(y[1], 32.25f);
  EXPECT_EQ(y[7], -32.25f);
  EXPECT_EQ(y[8], 6.0f);      // group 1: grid 0
  EXPECT_EQ(y[16], 14.0f);    // group 2: 8 * 1.75
  EXPECT_EQ(y[17], 43.75f);   // 25 * 1.75
  EXPECT_EQ(y[19], 14.0f);
  EXPECT_EQ(y[23], 43.75f);
  EXPECT_EQ(y[24], 14.0f);
  EXPECT_EQ(y[32], 2.0f);     // 8 * 0.25
}

TEST(QuantLayoutLow, IQ2_S) {
  // Group 0: index 1 | 2 << 8 = 513 (0x1908081919080819), sign byte 0x01 (odd count allowed);
  // group 3: index 0xFF | 3 << 8 = 1023 (all 0x2b), sign byte 0x80. scales[0] = 0x20: db = 0.125
  // for groups 0-1, 2.5 * 0.25 = 0.625 for groups 2-3.
  std::vector<uint8_t> b(82);
  put16(b, 0, kH1);
  b[2 + 0] = 0x01, b[2 + 3] = 0xFF;
  b[34 + 0] = 0x01, b[34 + 3] = 0x80;
  b[66] = 0x02 | (0x03 << 6);
  b[74] = 0x20;
  const auto y = decode(DType::IQ2_S, b);
  EXPECT_EQ(y[0], -3.125f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[3], 3.125f);
  EXPECT_EQ(y[7], 3.125f);
  EXPECT_EQ(y[16], 5.0f);      // group 2: grid 0, 8 * 0.625
  EXPECT_EQ(y[24], 26.875f);
  EXPECT_EQ(y[31], -26.875f);
}

TEST(QuantLayoutLow, IQ3_XXS) {
  // Sub-block 0: points 1 (0x04040414) and 255 (0x3e341c04) for group 0, sign index 1 (0x81),
  // scale 3: db = 3.5 * 0.5 = 1.75. Sub-block 1: point 100 (0x14040c1c) first, sign index 127
  // (0xFF), scale 0: db = 0.25.
  std::vector<uint8_t> b(98);
  put16(b, 0, kH1);
  b[2 + 0] = 1, b[2 + 1] = 255, b[2 + 8] = 100;
  put32(b, 66, 1u | (3u << 28));
  put32(b, 70, 127u);
  const auto y = decode(DType::IQ3_XXS, b);
  EXPECT_EQ(y[0], -35.0f);    // 20, negative
  EXPECT_EQ(y[1], 7.0f);
  EXPECT_EQ(y[4], 7.0f);      // second point: 4
  EXPECT_EQ(y[5], 49.0f);     // 28
  EXPECT_EQ(y[7], -108.5f);   // 62, negative
  EXPECT_EQ(y[8], 7.0f);      // group 1: point 0
  EXPECT_EQ(y[32], -7.0f);    // 28 * 0.25, negative
  EXPECT_EQ(y[33], -3.0f);
  EXPECT_EQ(y[35], -5.0f);
  EXPECT_EQ(y[36], -1.0f);    // point 0 (4), negative
}

TEST(QuantLayoutLow, IQ3_S) {
  // Points 300 (0x07030503) and 511 (0x0f0f0101) for elements 0..7 (9th bits in qh[0] bits 0-1),
  // signs[0] = 0x21; sub-block 0 scale 2: db = 0.5 * 5. Sub-block 1 scale 0: db = 0.5. The last
  // point: 511 again (qh[7] bit 7), sub-block 7 scale 7 (db 7.5), element 255 negative.
  std::vector<uint8_t> b(110);
  put16(b, 0, kH0_5);
  b[2 + 0] = 0x2C, b[2 + 1] = 0xFF, b[2 + 63] = 0xFF;
  b[66] = 0x03, b[66 + 7] = 0x80;
  b[74] = 0x21, b[74 + 31] = 0x80;
  b[106] = 0x02, b[109] = 0x70;
  const auto y = decode(DType::IQ3_S, b);
  EXPECT_EQ(y[0], -7.5f);
  EXPECT_EQ(y[1], 12.5f);
  EXPECT_EQ(y[3], 17.5f);
  EXPECT_EQ(y[4], 2.5f);
  EXPECT_EQ(y[5], -2.5f);
  EXPECT_EQ(y[6], 37.5f);
  EXPECT_EQ(y[32], 0.5f);
  EXPECT_EQ(y[252], 7.5f);
  EXPECT_EQ(y[254], 112.5f);
  EXPECT_EQ(y[255], -112.5f);
}

TEST(QuantLayoutLow, IQ1_S) {
  // Sub-block 0: qh = 4 << 3 | 2 << 12 (group 1 high bits 4, scale 2: dl = 5, delta +1/8);
  // group 0 point 1 (0xffffffffffffff01), group 1 point 0x4D2 = 1234 (0x0001ff00ff01ff01).
  // Sub-block 1: qh = 0x8000 | 7 << 9 (delta -1/8, scale 0: dl = 1, group 3 high bits 7); group 0
  // point 0 (all -1), group 3 point 2047 (all 1).
  std::vector<uint8_t> b(50);
  put16(b, 0, kH1);
  b[2 + 0] = 1, b[2 + 1] = 0xD2, b[2 + 7] = 0xFF;
  put16(b, 34, static_cast<uint16_t>((4 << 3) | (2 << 12)));
  put16(b, 36, static_cast<uint16_t>(0x8000 | (7 << 9)));
  const auto y = decode(DType::IQ1_S, b);
  EXPECT_EQ(y[0], 5.625f);    // 5 * (1 + 0.125)
  EXPECT_EQ(y[1], -4.375f);   // 5 * (-1 + 0.125)
  EXPECT_EQ(y[8], 5.625f);
  EXPECT_EQ(y[9], -4.375f);
  EXPECT_EQ(y[12], 0.625f);   // 5 * (0 + 0.125)
  EXPECT_EQ(y[15], 0.625f);
  EXPECT_EQ(y[32], -1.125f);
  EXPECT_EQ(y[56], 0.875f);
}

TEST(QuantLayoutLow, IQ1_M) {
  // d = 1.0 (0x3C00) split into the top nibbles of the four scale words: 0, 0, 0xC, 0x3. Scales:
  // half 0 -> 1 (dl 3), half 1 -> 2 (dl 5), half 15 -> 7 (dl 15).
  // Group 0: point 1; group 1: point 0 with delta -1/8 (qh[0] high nibble 8); group 2: point
  // 1234 (qh[1] low nibble 4); group 31: point 2047, delta -1/8 (qh[15] high nibble 0xF).
  std::vector<uint8_t> b(56);
  b[0] = 1, b[2] = 0xD2, b[31] = 0xFF;
  b[32] = 0x80, b[33] = 0x04, b[47] = 0xF0;
  put16(b, 48, 1 | (2 << 3));
  put16(b, 50, 0);
  put16(b, 52, 0xC000);
  put16(b, 54, static_cast<uint16_t>(0x3000 | (7 << 9)));
  const auto y = decode(DType::IQ1_M, b);
  EXPECT_EQ(y[0], 3.375f);
  EXPECT_EQ(y[1], -2.625f);
  EXPECT_EQ(y[8], -3.375f);
  EXPECT_EQ(y[16], 5.625f);
  EXPECT_EQ(y[20], 0.625f);
  EXPECT_EQ(y[255], 13.125f);
}

}  // namespace
}  // namespace cadenza
