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
//   Q2_K  x = (d * sc[j]) * q - (dmin * mn[j])   j = i / 16 (16 sub-blocks), q in 0..3
//   Q3_K  x = (d * (sc[j] - 32)) * q             j = i / 16, sc 6 bits, q in -4..3
//   IQ4_NL x = d * kIq4nlValues[q]               q 4 bits (tensor/iq_grids.h)
//   IQ4_XS x = (d * (sc[j] - 32)) * kIq4nlValues[q]   j = i / 32, sc 6 bits
//   MXFP4 x = 2^(e - 128) * kMxfp4Values[q]      e an E8M0 byte, q an FP4 E2M1 code
//   IQ2_XXS/IQ2_XS/IQ2_S/IQ3_XXS/IQ3_S  x = db * g * s   g a coordinate of a grid point
//         (tensor/iq_grids.h), s = +-1 from the stored signs, db = a sub-block scale from d
//   IQ1_S/IQ1_M  x = dl * (g + delta)   g in {-1, 0, 1} from kIq1s, delta = +-1/8
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

// Q2_K: 256 elements in 16 sub-blocks of 16, 2.625 bits each. Sub-block j has a 4-bit scale
// sc[j] = scales[j] & 0xF and a 4-bit min mn[j] = scales[j] >> 4; x = (d*sc[j])*q - (dmin*mn[j]).
// Quants: two halves of 128 elements (h = 0, 1), half h using qs[32h .. 32h+31]. Element
// 128h + 32g + l (g = 0..3, l = 0..31) is bits 2g, 2g+1 of qs[32h + l]; so each byte holds
// four elements 32 apart. (Sub-block j = 8h + 2g + l / 16.)
struct BlockQ2_K {
  uint8_t scales[16];    // low nibble: scale, high nibble: min, per 16-element sub-block
  uint8_t qs[64];        // 2-bit quants, four elements per byte as above
  uint16_t d;            // fp16 super-scale of the scales
  uint16_t dmin;         // fp16 super-scale of the mins
};
static_assert(sizeof(BlockQ2_K) == 84);

// Q3_K: 256 elements in 16 sub-blocks of 16, 3.4375 bits each. Symmetric; each sub-block j has
// a 6-bit scale sc[j] (0..63, used as sc[j] - 32); x = (d*(sc[j]-32)) * q with q in -4..3.
// q = low2 - (high bit set ? 0 : 4), i.e. the 3-bit unsigned code u = low2 + 4*high is q + 4.
//   low2 of element 128h + 32g + l: bits 2g, 2g+1 of qs[32h + l]   (as Q2_K)
//   high bit of element i:          bit i / 32 of hmask[i % 32]
// The 16 six-bit scales are packed in 12 bytes (see unpack_scale_q3_k):
//   low 4 bits of sc[j]:  j < 8: scales[j] & 0xF;   j >= 8: scales[j - 8] >> 4
//   high 2 bits of sc[j]: bits 2*(j/4), 2*(j/4)+1 of scales[8 + j % 4]
struct BlockQ3_K {
  uint8_t hmask[32];     // high bits, bit b of byte l <-> element 32b + l
  uint8_t qs[64];        // low 2 bits, layout as Q2_K
  uint8_t scales[12];    // 16 scales, 6 bits each, packed as above
  uint16_t d;            // fp16 super-scale
};
static_assert(sizeof(BlockQ3_K) == 110);

// IQ4_NL: 32 elements, 4.5 bits each. Like Q4_0 but the nibble indexes a fixed non-linear table:
// x = d * kIq4nlValues[q] (tensor/iq_grids.h; values -127 .. 113). Nibble order as Q4_0: element
// j in the low nibble of qs[j], element j + 16 in its high nibble.
struct BlockIQ4_NL {
  uint16_t d;            // fp16 scale
  uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// IQ4_XS: 256 elements in 8 sub-blocks of 32, 4.25 bits each. Sub-block j has a 6-bit scale
// ls[j] = (low nibble j of scales_l) | (bits 2j, 2j+1 of scales_h) << 4, used as ls - 32:
//   low 4 bits: scales_l[j / 2] >> (4 * (j % 2)) & 0xF    high 2 bits: scales_h >> 2j & 3
// x = (d * (ls[j] - 32)) * kIq4nlValues[q]. Sub-block j's quants are qs[16j .. 16j+15] in
// IQ4_NL's nibble order (element 32j + l low nibble of qs[16j + l], 32j + 16 + l high nibble).
struct BlockIQ4_XS {
  uint16_t d;            // fp16 super-scale
  uint16_t scales_h;     // high 2 bits of the 8 sub-block scales (little-endian uint16)
  uint8_t scales_l[4];   // low 4 bits of the 8 sub-block scales, two per byte
  uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// MXFP4 (OCP microscaling FP4): 32 elements, 4.25 bits each. e is an E8M0 scale (a biased power
// of two, scale = 2^(e - 127)); each nibble is an FP4 E2M1 number (sign, 2-bit exponent, 1-bit
// mantissa: 0, 0.5, 1, 1.5, 2, 3, 4, 6). x = 2^(e - 127) * e2m1(q) = 2^(e - 128) *
// kMxfp4Values[q]. The E8M0 code 0xFF (NaN in the OCP spec) is decoded by the same formula, as
// the reference decoder does. Nibble order as Q4_0 (element j low nibble of qs[j], j + 16 high).
struct BlockMXFP4 {
  uint8_t e;             // E8M0 shared exponent
  uint8_t qs[16];        // E2M1 codes
};
static_assert(sizeof(BlockMXFP4) == 17);

// IQ2_XXS: 256 elements in 8 sub-blocks of 32, 2.0625 bits each. Sub-block j uses the 8 bytes
// qs[8j .. 8j+7] as two little-endian uint32: a = bytes 0..3, b = bytes 4..7.
//   byte k of a (k = 0..3): index into kIq2xxs (256 points) for the group of 8 elements
//                           32j + 8k .. 32j + 8k + 7
//   bits 7k .. 7k+6 of b:   sign index s of group k; signs = kSigns.v[s] (bit t: element t < 0)
//   bits 28..31 of b:       4-bit scale ls; db = d * (0.5 + ls) * 0.25
// x = db * grid[t] * (sign t ? -1 : 1).
struct BlockIQ2_XXS {
  uint16_t d;            // fp16 super-scale
  uint8_t qs[64];        // per sub-block: 4 grid indices, then 4 x 7 sign bits + 4-bit scale
};
static_assert(sizeof(BlockIQ2_XXS) == 66);

// IQ2_XS: 256 elements in 8 sub-blocks of 32, 2.3125 bits each. qs[4j + k] (k = 0..3, a
// little-endian uint16) covers group k of sub-block j (elements 32j + 8k ..): low 9 bits index
// kIq2xs (512 points), high 7 bits are the sign index (kSigns). Each sub-block has two 4-bit
// scales, scales[j] & 0xF for groups 0-1 and scales[j] >> 4 for groups 2-3:
// db = d * (0.5 + ls) * 0.25; x = db * grid[t] * sign.
struct BlockIQ2_XS {
  uint16_t d;            // fp16 super-scale
  uint16_t qs[32];       // 9-bit grid index | 7-bit sign index << 9
  uint8_t scales[8];     // two 4-bit scales per sub-block of 32
};
static_assert(sizeof(BlockIQ2_XS) == 74);

// IQ2_S: 256 elements in 8 sub-blocks of 32, 2.5625 bits each. Group k of sub-block j (8
// elements from 32j + 8k) has the 10-bit index qs[4j + k] | ((qh[j] >> 2k) & 3) << 8 into
// kIq2s (1024 points) and a full sign byte signs[4j + k] (bit t: element t < 0; no parity rule).
// Scales as IQ2_XS: scales[j] & 0xF for groups 0-1, >> 4 for groups 2-3,
// db = d * (0.5 + ls) * 0.25.
struct BlockIQ2_S {
  uint16_t d;            // fp16 super-scale
  uint8_t qs[32];        // low 8 bits of the grid indices
  uint8_t signs[32];     // one sign byte per group of 8
  uint8_t qh[8];         // high 2 bits of the 4 indices of each sub-block
  uint8_t scales[8];     // two 4-bit scales per sub-block of 32
};
static_assert(sizeof(BlockIQ2_S) == 82);

// IQ3_XXS: 256 elements in 8 sub-blocks of 32, 3.0625 bits each. Every byte of qs indexes kIq3xxs
// (256 points of 4): element 4m .. 4m+3 come from point qs[m]. sas[4j .. 4j+3] is a little-endian
// uint32 b for sub-block j: bits 7k .. 7k+6 the sign index (kSigns) of its group k of 8 elements
// (two grid points), bits 28..31 the scale ls; db = d * (0.5 + ls) * 0.5; x = db * g * sign.
struct BlockIQ3_XXS {
  uint16_t d;            // fp16 super-scale
  uint8_t qs[64];        // grid indices, one per 4 elements
  uint8_t sas[32];       // per sub-block: 4 x 7 sign bits + 4-bit scale
};
static_assert(sizeof(BlockIQ3_XXS) == 98);

// IQ3_S: 256 elements in 8 sub-blocks of 32, 3.4375 bits each. Element 4m .. 4m+3 come from
// point qs[m] | ((qh[m / 8] >> (m % 8)) & 1) << 8 of kIq3s (512 points of 4). signs: bit i % 8 of
// signs[i / 8] set = element i negative (no parity rule). Sub-block j's 4-bit scale is
// scales[j / 2] >> (4 * (j % 2)) & 0xF; db = d * (1 + 2 * ls); x = db * g * sign.
struct BlockIQ3_S {
  uint16_t d;            // fp16 super-scale
  uint8_t qs[64];        // low 8 bits of the grid indices
  uint8_t qh[8];         // 9th index bit, one per grid point
  uint8_t signs[32];     // one sign bit per element
  uint8_t scales[4];     // 4-bit scales, two per byte
};
static_assert(sizeof(BlockIQ3_S) == 110);

// IQ1_S: 256 elements in 8 sub-blocks of 32, 1.5625 bits each. qh[j] (uint16) for sub-block j:
// bits 3k .. 3k+2 the high index bits of group k (elements 32j + 8k ..), bits 12..14 the
// scale ls, bit 15 the sign of delta. Group k's point is qs[4j + k] | ((qh[j] >> 3k) & 7) << 8 in
// kIq1s (2048 points, values -1/0/1). dl = d * (2 * ls + 1), delta = bit 15 ? -1/8 : +1/8,
// x = dl * (g + delta).
struct BlockIQ1_S {
  uint16_t d;            // fp16 super-scale
  uint8_t qs[32];        // low 8 bits of the grid indices
  uint16_t qh[8];        // per sub-block: 4 x 3 index bits, 3-bit scale, delta sign
};
static_assert(sizeof(BlockIQ1_S) == 50);

// IQ1_M: 256 elements in 16 halves of 16 (two groups of 8 each), 1.75 bits each; no separate d
// field. Group m (elements 8m .. 8m+7, m = 0..31): point qs[m] | (nibble & 7) << 8 of kIq1s, with
// nibble = qh[m / 2] >> (4 * (m % 2)) & 0xF; delta = nibble bit 3 ? -1/8 : +1/8.
// scales is four little-endian uint16 w[0..3]. The fp16 super-scale d is the top nibbles:
// d bits = (w[0] >> 12) | (w[1] >> 12) << 4 | (w[2] >> 12) << 8 | (w[3] >> 12) << 12.
// Half h (elements 16h ..) has the 3-bit scale ls = w[h / 4] >> (3 * (h % 4)) & 7;
// dl = d * (2 * ls + 1); x = dl * (g + delta).
struct BlockIQ1_M {
  uint8_t qs[32];        // low 8 bits of the grid indices
  uint8_t qh[16];        // per group: 3 high index bits and the delta sign
  uint8_t scales[8];     // 16 x 3-bit scales plus the 4 nibbles of d
};
static_assert(sizeof(BlockIQ1_M) == 56);

// Sub-block j's 6-bit scale (0..63, used as value - 32) from Q3_K's 12 packed bytes.
inline int unpack_scale_q3_k(int j, const uint8_t* scales) {
  const int lo = j < 8 ? (scales[j] & 0xF) : (scales[j - 8] >> 4);
  const int hi = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return lo | (hi << 4);
}

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
