// Block structs of the quantized GGUF types, byte for byte as GGUF files (and ggml) store them.
//
// Conventions shared by every block:
//  - Little-endian (GGUF is little-endian; we static_assert the host is too).
//  - "fp16" fields hold IEEE binary16 bits (see fp16_to_fp32 in tensor/quant.h), never floats.
//  - A row of n elements is n / (block size) consecutive blocks with no padding between them, and
//    rows of a mapped file sit wherever the file puts them, so a block need not be aligned for
//    its struct. The (de)quantizers therefore copy blocks in and out with memcpy instead of
//    dereferencing casted pointers.
//  - Element index i below is the index inside the block (0 .. block size - 1).
//
// Decoded values (x = element value, q = its quantized integer):
//   Q4_0  x = d * (q - 8)          q in 0..15
//   Q4_1  x = d * q + m            q in 0..15
//   Q5_0  x = d * (q - 16)         q in 0..31
//   Q5_1  x = d * q + m            q in 0..31
//   Q8_0  x = d * q                q in -128..127 (the quantizer uses -127..127)
//   Q8_1  x = d * q                (s = d * sum(q) is a precomputed helper for dot products)
//   Q4_K  x = (d * sc[j]) * q - (dmin * mn[j])   j = i / 32 (8 sub-blocks), q in 0..15
//   Q5_K  same as Q4_K with q in 0..31
//   Q6_K  x = (d * sc[j]) * (q - 32)             j = i / 16 (16 sub-blocks), q in 0..63
//   Q8_K  x = d * q                               d is an fp32 here, not fp16
#pragma once

#include <bit>
#include <cstdint>

namespace cadenza {

static_assert(std::endian::native == std::endian::little,
              "block structs mirror GGUF's little-endian layout; a big-endian host needs byte swaps");

inline constexpr int kQK = 32;     // elements per block of the Q4_0 .. Q8_1 family
inline constexpr int kQK_K = 256;  // elements per super-block of the K-quants

// Q4_0: 32 elements, 4.5 bits each. Symmetric: one fp16 scale d, nibbles offset by 8.
// qs[j] low nibble is element j, high nibble is element j + 16 (j = 0..15); i.e. the first half
// of the block lives in the low nibbles, the second half in the high nibbles.
struct BlockQ4_0 {
  uint16_t d;       // fp16 scale
  uint8_t qs[16];   // element j: qs[j] & 0xF; element j+16: qs[j] >> 4
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_1: like Q4_0 but asymmetric: x = d*q + m, m being the block minimum (fp16).
struct BlockQ4_1 {
  uint16_t d;       // fp16 scale
  uint16_t m;       // fp16 offset (block minimum)
  uint8_t qs[16];   // nibble order as Q4_0
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0: Q4_0 plus a fifth bit per element. qh is one little-endian uint32: bit i is the high bit
// (value 16) of element i, for all 32 elements (bits 0..15 -> elements 0..15 = the low nibbles,
// bits 16..31 -> elements 16..31 = the high nibbles). Values are offset by 16.
struct BlockQ5_0 {
  uint16_t d;       // fp16 scale
  uint8_t qh[4];    // high bits, little-endian uint32, bit i <-> element i
  uint8_t qs[16];   // low 4 bits, nibble order as Q4_0
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1: Q5_0's bit layout with Q4_1's asymmetric d/m encoding (no offset on q).
struct BlockQ5_1 {
  uint16_t d;       // fp16 scale
  uint16_t m;       // fp16 offset (block minimum)
  uint8_t qh[4];    // high bits, little-endian uint32, bit i <-> element i
  uint8_t qs[16];   // low 4 bits, nibble order as Q4_0
};
static_assert(sizeof(BlockQ5_1) == 24);

// Q8_0: 32 signed bytes and one fp16 scale, element i = qs[i].
struct BlockQ8_0 {
  uint16_t d;       // fp16 scale
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q8_1: Q8_0 plus s = d * sum(qs) (fp16), which lets a dot product against a Q4_1/Q5_1 block
// apply the other block's m once instead of per element. Used for activations, never weights.
struct BlockQ8_1 {
  uint16_t d;       // fp16 scale
  uint16_t s;       // fp16 d * sum(qs[i])
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_1) == 36);

// Q4_K: 256 elements in 8 sub-blocks of 32, 4.5 bits each. Each sub-block j has a 6-bit scale
// sc[j] and a 6-bit min mn[j]; x = (d*sc[j])*q - (dmin*mn[j]).
// The 16 six-bit numbers are packed in 12 bytes (see unpack_scale_min_k4):
//   j < 4:  sc[j] = scales[j] & 63            mn[j] = scales[j+4] & 63
//   j >= 4: sc[j] = (scales[j+4] & 0xF) | ((scales[j-4] >> 6) << 4)
//           mn[j] = (scales[j+4] >> 4)  | ((scales[j]   >> 6) << 4)
// i.e. bytes 0..3 hold sc[0..3] plus the top 2 bits of sc[4..7], bytes 4..7 hold mn[0..3] plus
// the top 2 bits of mn[4..7], bytes 8..11 hold the low nibbles of sc[4..7] (low) and mn[4..7]
// (high).
// Quants: 4 chunks of 64 elements, 32 bytes each. In chunk c (elements 64c .. 64c+63), byte
// qs[32c + l] holds element 64c + l in its low nibble and element 64c + 32 + l in its high nibble.
struct BlockQ4_K {
  uint16_t d;            // fp16 super-scale of the sub-block scales
  uint16_t dmin;         // fp16 super-scale of the sub-block mins
  uint8_t scales[12];    // 8 scales + 8 mins, 6 bits each, packed as above
  uint8_t qs[128];       // nibbles, chunk order as above
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: Q4_K plus a fifth bit per element. qh[l] bit b is the high bit (value 16) of element
// 32*b + l (b = 0..7, l = 0..31), i.e. bit b covers sub-block b. The low 4 bits and the
// scales/mins are exactly as in Q4_K.
struct BlockQ5_K {
  uint16_t d;            // fp16 super-scale of the sub-block scales
  uint16_t dmin;         // fp16 super-scale of the sub-block mins
  uint8_t scales[12];    // packed as in Q4_K
  uint8_t qh[32];        // high bits: element i -> qh[i % 32] bit (i / 32)
  uint8_t qs[128];       // low nibbles, chunk order as Q4_K
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 256 elements in 16 sub-blocks of 16, 6.5625 bits each. Symmetric with a signed 8-bit
// scale per sub-block: x = (d*scales[i/16]) * (q - 32), q = 6 bits split in a low nibble (ql) and
// two high bits (qh).
// The block is two halves of 128 elements (h = 0, 1), each using ql[64h .. 64h+63] and
// qh[32h .. 32h+31]. Inside a half, element 32g + l (quarter g = 0..3, l = 0..31) takes
//   low 4 bits:  ql[64h + l + 32*(g & 1)], low nibble for g < 2, high nibble for g >= 2
//   high 2 bits: bits 2g, 2g+1 of qh[32h + l]
struct BlockQ6_K {
  uint8_t ql[128];       // low 4 bits
  uint8_t qh[64];        // high 2 bits, four elements per byte
  int8_t scales[16];     // signed sub-block scales
  uint16_t d;            // fp16 super-scale
};
static_assert(sizeof(BlockQ6_K) == 210);

// Q8_K: 256 signed bytes with an fp32 scale, plus the sum of each group of 16 quants (bsums[g] =
// sum of qs[16g .. 16g+15]) for K-quant dot products. Activation format, never stored in files.
struct BlockQ8_K {
  float d;               // fp32 scale
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// Sub-block j's 6-bit scale and min from the 12 packed bytes of Q4_K/Q5_K (layout above).
inline void unpack_scale_min_k4(int j, const uint8_t* scales, int* sc, int* mn) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *mn = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    *mn = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

}  // namespace cadenza
