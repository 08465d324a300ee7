// Hand-built blocks: raw bytes at explicit offsets (not via the structs in blocks.h, so a struct
// layout mistake cannot cancel itself out) decode to values computed by hand from the GGUF
// layout. Each test touches every sub-block, the scale/min packing and the high-bit planes.
// Plus a few hand-checked encodings, and decoding from odd addresses (UBSan checks alignment).
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/dtype.h"
#include "tensor/quant.h"

namespace cadenza {
namespace {

// fp16 bit patterns used below.
constexpr uint16_t kH0_25 = 0x3400, kH0_5 = 0x3800, kH1 = 0x3C00, kH2 = 0x4000;
constexpr uint16_t kHm1 = 0xBC00, kH10 = 0x4900;

void put16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v & 0xFF);
  b[off + 1] = static_cast<uint8_t>(v >> 8);
}

std::vector<float> decode(DType t, const std::vector<uint8_t>& bytes) {
  const int64_t n = traits(t).block_size;
  EXPECT_EQ(bytes.size(), traits(t).type_size);
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(t, bytes.data(), y.data(), n);
  // The same block one byte off alignment must decode identically.
  std::vector<uint8_t> shifted(bytes.size() + 1);
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  std::vector<float> y2(static_cast<size_t>(n));
  dequantize_row(t, shifted.data() + 1, y2.data(), n);
  EXPECT_EQ(y, y2) << "decoding depends on alignment";
  return y;
}

TEST(QuantLayout, Q8_0) {
  std::vector<uint8_t> b(34);
  put16(b, 0, kH0_5);
  for (int i = 0; i < 32; ++i) b[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(i * 8 - 128));
  const auto y = decode(DType::Q8_0, b);
  EXPECT_EQ(y[0], -64.0f);   // -128 * 0.5
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[17], 4.0f);
  EXPECT_EQ(y[31], 60.0f);   // 120 * 0.5
}

TEST(QuantLayout, Q8_1) {
  std::vector<uint8_t> b(36);
  put16(b, 0, kH2);
  put16(b, 2, 0x7BFF);  // s: a helper for dot products, never part of the decoded values
  for (int i = 0; i < 32; ++i) b[4 + i] = static_cast<uint8_t>(static_cast<int8_t>(-i));
  const auto y = decode(DType::Q8_1, b);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[5], -10.0f);
  EXPECT_EQ(y[31], -62.0f);
}

TEST(QuantLayout, Q4_0) {
  // qs[j] = j | (15 - j) << 4: element j = (j - 8) * d, element j + 16 = (7 - j) * d.
  std::vector<uint8_t> b(18);
  put16(b, 0, kH2);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(DType::Q4_0, b);
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[3], -10.0f);
  EXPECT_EQ(y[15], 14.0f);
  EXPECT_EQ(y[16], 14.0f);
  EXPECT_EQ(y[20], 6.0f);   // qs[4] >> 4 = 11 -> (11 - 8) * 2
  EXPECT_EQ(y[31], -16.0f);
}

TEST(QuantLayout, Q4_1) {
  std::vector<uint8_t> b(20);
  put16(b, 0, kH0_5);
  put16(b, 2, kHm1);
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(DType::Q4_1, b);
  EXPECT_EQ(y[0], -1.0f);        // 0 * 0.5 - 1
  EXPECT_EQ(y[15], 6.5f);        // 15 * 0.5 - 1
  EXPECT_EQ(y[16], 6.5f);        // high nibble of qs[0] = 15
  EXPECT_EQ(y[29], 0.0f);        // high nibble of qs[13] = 2
}

TEST(QuantLayout, Q5_0) {
  // qh = bits 0, 16 and 31 set: the fifth bit of elements 0, 16 and 31.
  std::vector<uint8_t> b(22);
  put16(b, 0, kH1);
  b[2] = 0x01; b[3] = 0x00; b[4] = 0x01; b[5] = 0x80;
  for (int j = 0; j < 16; ++j) b[6 + j] = 0x88;
  b[6 + 0] = 0x21;   // element 0: 1 | 16; element 16: 2 | 16
  b[6 + 15] = 0xF0;  // element 15: 0;     element 31: 15 | 16
  const auto y = decode(DType::Q5_0, b);
  EXPECT_EQ(y[0], 1.0f);     // 17 - 16
  EXPECT_EQ(y[1], -8.0f);    // 8 - 16
  EXPECT_EQ(y[15], -16.0f);  // 0 - 16
  EXPECT_EQ(y[16], 2.0f);    // 18 - 16
  EXPECT_EQ(y[17], -8.0f);
  EXPECT_EQ(y[31], 15.0f);   // 31 - 16
}

TEST(QuantLayout, Q5_1) {
  // Fifth bits for element 5 (qh bit 5 -> byte 0) and element 20 (bit 20 -> byte 2, bit 4).
  std::vector<uint8_t> b(24);
  put16(b, 0, kH0_25);
  put16(b, 2, kH10);
  b[4] = 0x20; b[5] = 0x00; b[6] = 0x10; b[7] = 0x00;
  for (int j = 0; j < 16; ++j) b[8 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(DType::Q5_1, b);
  EXPECT_EQ(y[4], 11.0f);    // 4 * 0.25 + 10
  EXPECT_EQ(y[5], 15.25f);   // (5 + 16) * 0.25 + 10
  EXPECT_EQ(y[20], 16.75f);  // ((15 - 4) + 16) * 0.25 + 10
  EXPECT_EQ(y[21], 12.5f);   // (15 - 5) * 0.25 + 10
}

// Q4_K/Q5_K sub-block scales and mins used below, and their 12-byte packing worked out by hand:
//   sc = {1, 2, 3, 63, 17, 33, 50, 63}    mn = {0, 5, 40, 63, 4, 20, 34, 48}
//   bytes 0..3  = sc[0..3] | top2(sc[4..7]) << 6 = 0x41 0x82 0xC3 0xFF
//   bytes 4..7  = mn[0..3] | top2(mn[4..7]) << 6 = 0x00 0x45 0xA8 0xFF
//   bytes 8..11 = low4(sc[4..7]) | low4(mn[4..7]) << 4 = 0x41 0x41 0x22 0x0F
constexpr uint8_t kK4Scales[12] = {0x41, 0x82, 0xC3, 0xFF, 0x00, 0x45,
                                   0xA8, 0xFF, 0x41, 0x41, 0x22, 0x0F};

// 128 nibble bytes: byte k = (k % 16) | (15 - k % 16) << 4.
void put_k_nibbles(std::vector<uint8_t>& b, size_t off) {
  for (int k = 0; k < 128; ++k) b[off + k] = static_cast<uint8_t>((k % 16) | ((15 - k % 16) << 4));
}

TEST(QuantLayout, Q4_K) {
  // x = (d * sc[j]) * q - dmin * mn[j], d = 1, dmin = 0.5; element e of chunk c = e / 64 reads
  // byte 32c + e % 32, low nibble if e % 64 < 32.
  std::vector<uint8_t> b(144);
  put16(b, 0, kH1);
  put16(b, 2, kH0_5);
  std::memcpy(b.data() + 4, kK4Scales, 12);
  put_k_nibbles(b, 16);
  const auto y = decode(DType::Q4_K, b);
  EXPECT_EQ(y[0], 0.0f);      // j0: q = low(byte 0) = 0        -> 0*1 - 0
  EXPECT_EQ(y[33], 25.5f);    // j1: q = high(byte 1) = 14      -> 14*2 - 2.5
  EXPECT_EQ(y[70], -2.0f);    // j2: q = low(byte 38) = 6       -> 6*3 - 20
  EXPECT_EQ(y[100], 661.5f);  // j3: q = high(byte 36) = 11     -> 11*63 - 31.5
  EXPECT_EQ(y[130], 32.0f);   // j4: q = low(byte 66) = 2       -> 2*17 - 2
  EXPECT_EQ(y[170], 155.0f);  // j5: q = high(byte 74) = 5      -> 5*33 - 10
  EXPECT_EQ(y[200], 383.0f);  // j6: q = low(byte 104) = 8      -> 8*50 - 17
  EXPECT_EQ(y[255], -24.0f);  // j7: q = high(byte 127) = 0     -> 0*63 - 24
}

TEST(QuantLayout, Q5_K) {
  // As Q4_K plus fifth bits: element e's is qh[e % 32] bit e / 32.
  std::vector<uint8_t> b(176);
  put16(b, 0, kH1);
  put16(b, 2, kH0_5);
  std::memcpy(b.data() + 4, kK4Scales, 12);
  b[16 + 0] = 0x02;   // element 32
  b[16 + 1] = 0x02;   // element 33
  b[16 + 2] = 0x10;   // element 130
  b[16 + 4] = 0x08;   // element 100
  b[16 + 10] = 0x20;  // element 170
  b[16 + 31] = 0x80;  // element 255
  b[16 + 8] = 0xBF;   // every element with e % 32 == 8 except sub-block 6 (element 200)
  put_k_nibbles(b, 48);
  const auto y = decode(DType::Q5_K, b);
  EXPECT_EQ(y[0], 0.0f);       // no fifth bit
  EXPECT_EQ(y[32], 59.5f);     // j1: (15 + 16)*2 - 2.5
  EXPECT_EQ(y[33], 57.5f);     // j1: (14 + 16)*2 - 2.5
  EXPECT_EQ(y[70], -2.0f);     // j2: 6*3 - 20
  EXPECT_EQ(y[100], 1669.5f);  // j3: (11 + 16)*63 - 31.5
  EXPECT_EQ(y[130], 304.0f);   // j4: (2 + 16)*17 - 2
  EXPECT_EQ(y[170], 683.0f);   // j5: (5 + 16)*33 - 10
  EXPECT_EQ(y[200], 383.0f);   // j6: bit 6 of qh[8] clear -> 8*50 - 17
  EXPECT_EQ(y[232], 1425.0f);  // j7: q = high(byte 104) = 7, qh[8] bit 7 -> (7 + 16)*63 - 24
  EXPECT_EQ(y[255], 984.0f);   // j7: (0 + 16)*63 - 24
}

TEST(QuantLayout, Q6_K) {
  // ql[0..127], qh[128..191], scales[192..207], d[208]. Element 128h + 32g + l: low nibble of
  // ql[64h + l + 32(g&1)] (high nibble if g >= 2), high bits 2g..2g+1 of qh[32h + l];
  // x = d * scales[e/16] * (q - 32).
  std::vector<uint8_t> b(210);
  for (int k = 0; k < 128; ++k) b[k] = static_cast<uint8_t>((k % 16) | ((15 - k % 16) << 4));
  for (int k = 0; k < 64; ++k) b[128 + k] = 0xE4;  // g0: 0, g1: 1, g2: 2, g3: 3
  const int8_t sc[16] = {127, -1, 2, -3, 4, 5, 6, 7, -8, 9, 10, 11, 12, 13, 14, -128};
  for (int k = 0; k < 16; ++k) b[192 + k] = static_cast<uint8_t>(sc[k]);
  put16(b, 208, kH0_5);
  const auto y = decode(DType::Q6_K, b);
  EXPECT_EQ(y[0], -2032.0f);   // q = 0 | 0<<4 = 0 -> -32; 0.5*127*-32
  EXPECT_EQ(y[17], 15.5f);     // q = low(ql[17]) = 1 -> -31; 0.5*-1*-31
  EXPECT_EQ(y[40], -8.0f);     // g1: low(ql[40]) = 8, hi 1 -> 24-32 = -8; 0.5*2*-8
  EXPECT_EQ(y[77], 4.0f);      // g2: high(ql[13]) = 2, hi 2 -> 34-32 = 2; 0.5*4*2
  EXPECT_EQ(y[127], 56.0f);    // g3: high(ql[63]) = 0, hi 3 -> 48-32 = 16; 0.5*7*16
  EXPECT_EQ(y[128], 128.0f);   // h1 g0: low(ql[64]) = 0 -> -32; 0.5*-8*-32
  EXPECT_EQ(y[200], 42.0f);    // h1 g2: high(ql[72]) = 7, hi 2 -> 39-32 = 7; 0.5*12*7
  EXPECT_EQ(y[255], -1024.0f); // h1 g3: high(ql[127]) = 0, hi 3 -> 16; 0.5*-128*16
}

TEST(QuantLayout, Q8_K) {
  std::vector<uint8_t> b(292);
  const float d = 0.25f;
  std::memcpy(b.data(), &d, 4);
  for (int i = 0; i < 256; ++i) b[4 + i] = static_cast<uint8_t>(static_cast<int8_t>(i - 128));
  const auto y = decode(DType::Q8_K, b);
  EXPECT_EQ(y[0], -32.0f);
  EXPECT_EQ(y[128], 0.0f);
  EXPECT_EQ(y[255], 31.75f);
}

// Encodings whose bytes follow from the *_ref algorithms by hand.
TEST(QuantLayout, EncodeQ4_0) {
  // max |x| is -8 (signed), so d = -8 / -8 = 1 and q = x + 8 exactly.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i % 16 - 8);
  std::vector<uint8_t> q(18);
  quantize_row(DType::Q4_0, x.data(), q.data(), 32);
  EXPECT_EQ(q[0], 0x00);  // d = 1.0 = 0x3C00, little-endian
  EXPECT_EQ(q[1], 0x3C);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[2 + j], (j | (j << 4))) << j;
}

TEST(QuantLayout, EncodeQ5_0AndQ8_0) {
  // Q5_0: max = 16 -> d = -1, q = 16 - x: x = 16 -> 0, x = -15 -> 31 (fifth bit set).
  std::vector<float> x(32, 0.0f);
  x[0] = 16.0f;
  x[1] = -15.0f;
  x[17] = -1.0f;
  std::vector<uint8_t> q5(22);
  quantize_row(DType::Q5_0, x.data(), q5.data(), 32);
  EXPECT_EQ(q5[0], 0x00);
  EXPECT_EQ(q5[1], 0xBC);  // -1.0
  // qh: elements whose q >= 16: x <= 0 gives q = 16 - x >= 16, i.e. all but element 0.
  EXPECT_EQ(q5[2], 0xFE);
  EXPECT_EQ(q5[3], 0xFF);
  EXPECT_EQ(q5[4], 0xFF);
  EXPECT_EQ(q5[5], 0xFF);
  EXPECT_EQ(q5[6 + 0], 0x00);  // element 0: 0, element 16: 16 -> low bits 0
  EXPECT_EQ(q5[6 + 1], 0x1F);  // element 1: 31 -> 0xF; element 17: 17 -> 0x1

  // Q8_0: amax = 127 -> d = 1, q = round(x), halves away from zero.
  std::vector<float> y(32, 0.0f);
  y[0] = -127.0f;
  y[1] = 2.5f;
  y[2] = -2.5f;
  y[3] = 0.49f;
  std::vector<uint8_t> q8(34);
  quantize_row(DType::Q8_0, y.data(), q8.data(), 32);
  EXPECT_EQ(q8[0], 0x00);
  EXPECT_EQ(q8[1], 0x3C);
  EXPECT_EQ(static_cast<int8_t>(q8[2]), -127);
  EXPECT_EQ(static_cast<int8_t>(q8[3]), 3);
  EXPECT_EQ(static_cast<int8_t>(q8[4]), -3);
  EXPECT_EQ(static_cast<int8_t>(q8[5]), 0);
}

TEST(QuantLayout, GridValuesSurviveTheKQuantEncoders) {
  // Values already on a grid the format can represent come back (nearly) exactly, which only
  // happens if the encoder packs quants, scales and mins where the decoder reads them. One
  // non-zero region in sub-blocks 2 (32-element) / 4-5 (16-element), zeros elsewhere:
  //   Q4_K: q * 63/64, q = 0..15: sub-block scale 63/64 = (1/64) * 63, both exact in fp16/6 bits
  //   Q5_K: q * 63/64, q = 0..31
  //   Q6_K: -32 .. -1: scales 1 and 0.5 -> d = -1/128, int8 scales -128 and -64, all exact
  struct Case {
    DType t;
    float (*value)(int i);  // element 64 + i, i = 0..31
  };
  const Case cases[] = {
      {DType::Q4_K, [](int i) { return static_cast<float>(i % 16) * 63.0f / 64.0f; }},
      {DType::Q5_K, [](int i) { return static_cast<float>(i) * 63.0f / 64.0f; }},
      {DType::Q6_K, [](int i) { return static_cast<float>(i - 32); }},
  };
  for (const Case& c : cases) {
    std::vector<float> x(256, 0.0f);
    for (int i = 0; i < 32; ++i) x[64 + i] = c.value(i);
    std::vector<uint8_t> q(traits(c.t).type_size);
    quantize_row(c.t, x.data(), q.data(), 256);
    std::vector<float> y(256);
    dequantize_row(c.t, q.data(), y.data(), 256);
    for (int i = 0; i < 256; ++i)
      ASSERT_NEAR(y[i], x[i], 1e-4) << dtype_name(c.t) << " element " << i;
  }
}

TEST(QuantLayout, PlainTypes) {
  const float x[4] = {1.0f, -2.5f, 65504.0f, 1e-8f};
  uint8_t h[8];
  quantize_row(DType::F16, x, h, 4);
  EXPECT_EQ(h[0], 0x00);
  EXPECT_EQ(h[1], 0x3C);
  EXPECT_EQ(h[4], 0xFF);
  EXPECT_EQ(h[5], 0x7B);
  float y[4];
  dequantize_row(DType::F16, h, y, 4);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.5f);
  EXPECT_EQ(y[2], 65504.0f);
  EXPECT_NEAR(y[3], 1e-8f, 3e-8f);  // a subnormal half: 2^-24 resolution

  uint8_t bf[8];
  quantize_row(DType::BF16, x, bf, 4);
  EXPECT_EQ(bf[0], 0x80);  // 1.0 = 0x3F80
  EXPECT_EQ(bf[1], 0x3F);
  dequantize_row(DType::BF16, bf, y, 4);
  EXPECT_EQ(y[1], -2.5f);

  uint8_t f[16];
  quantize_row(DType::F32, x, f, 4);
  dequantize_row(DType::F32, f, y, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], x[i]);
  dequantize_row(DType::Q8_0, nullptr, nullptr, 0);  // empty rows are allowed
}

}  // namespace
}  // namespace cadenza
