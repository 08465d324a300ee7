// Scalar reference kernels (the `scalar` ISA level). Written for clarity: each dot product is
// computed in the order the block math reads (see docs/kernels.md), integer sums in int32, one
// float term per block added to a single float accumulator in block order. The activation
// quantizers are tensor/quant.h's quantize_row (the SIMD ones reproduce it bit for bit).
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/simd/internal.h"
#include "kernels/simd/kernels.h"
#include "tensor/blocks.h"
#include "tensor/iq_grids.h"
#include "tensor/quant.h"

namespace cadenza::simd::ref {
namespace {

float half_to_float(uint16_t h) { return fp16_to_fp32(h); }

template <typename Block>
Block load_block(const void* base, int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(base) + i * static_cast<int64_t>(sizeof(Block)),
              sizeof b);
  return b;
}

// Dot products of one weight row with one activation row.
float dot_q8_0(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ8_0 wb = load_block<BlockQ8_0>(w, b);
    const BlockQ8_0 ab = load_block<BlockQ8_0>(a, b);
    int32_t sumi = 0;
    for (int i = 0; i < kQK; ++i) sumi += int32_t{wb.qs[i]} * int32_t{ab.qs[i]};
    sum += (half_to_float(wb.d) * half_to_float(ab.d)) * static_cast<float>(sumi);
  }
  return sum;
}

float dot_q4_0(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ4_0 wb = load_block<BlockQ4_0>(w, b);
    const BlockQ8_0 ab = load_block<BlockQ8_0>(a, b);
    int32_t sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += ((wb.qs[j] & 0xF) - 8) * int32_t{ab.qs[j]};
      sumi += ((wb.qs[j] >> 4) - 8) * int32_t{ab.qs[j + kQK / 2]};
    }
    sum += (half_to_float(wb.d) * half_to_float(ab.d)) * static_cast<float>(sumi);
  }
  return sum;
}

// Per super-block: sumq = sum_j sc[j] * dot(q, a over sub-block j),
// summ = sum_j mn[j] * (sum of a over sub-block j, from bsums);
// term = (da * d) * sumq - (da * dmin) * summ.
float dot_q4_k(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ4_K wb = load_block<BlockQ4_K>(w, b);
    const BlockQ8_K ab = load_block<BlockQ8_K>(a, b);
    int32_t sumq = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {
      int sc = 0, mn = 0;
      unpack_scale_min_k4(j, wb.scales, &sc, &mn);
      const int c = j / 2;         // 64-element chunk
      const int shift = (j % 2) * 4;  // low nibbles: first 32 of the chunk
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l)
        dot += ((wb.qs[32 * c + l] >> shift) & 0xF) * int32_t{ab.qs[32 * j + l]};
      sumq += sc * dot;
      summ += mn * (int32_t{ab.bsums[2 * j]} + int32_t{ab.bsums[2 * j + 1]});
    }
    sum += (ab.d * half_to_float(wb.d)) * static_cast<float>(sumq) -
           (ab.d * half_to_float(wb.dmin)) * static_cast<float>(summ);
  }
  return sum;
}

// Per super-block: sumi = sum_j sc[j] * dot(q - 32, a over 16-element sub-block j);
// term = (da * d) * sumi.
float dot_q6_k(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_K wb = load_block<BlockQ6_K>(w, b);
    const BlockQ8_K ab = load_block<BlockQ8_K>(a, b);
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t dot = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        const int h = e / 128, g = (e % 128) / 32, l = e % 32;
        const uint8_t lo_byte = wb.ql[64 * h + l + 32 * (g & 1)];
        const int lo = g < 2 ? (lo_byte & 0xF) : (lo_byte >> 4);
        const int hi = (wb.qh[32 * h + l] >> (2 * g)) & 3;
        dot += ((lo | (hi << 4)) - 32) * int32_t{ab.qs[e]};
      }
      sumi += int32_t{wb.scales[j]} * dot;
    }
    sum += (ab.d * half_to_float(wb.d)) * static_cast<float>(sumi);
  }
  return sum;
}

// The grid types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (tensor/blocks.h): per
// 32-element sub-block the signed integer values (grid magnitude times sign; IQ1: 8 g +- 1) and
// the integer scales of its two halves (elements 0-15, 16-31); the decoded value is
// d * kFactor * scale * v.
struct GridSub {
  int32_t v[32];
  int32_t scale[2];
};

uint16_t grid_le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

void put_group(int32_t* v, const uint8_t* magnitudes, int n, uint8_t signs, int first) {
  for (int t = 0; t < n; ++t)
    v[t] = (signs >> (first + t)) & 1 ? -int32_t{magnitudes[t]} : int32_t{magnitudes[t]};
}

// The fp16 super-scale d: at offset 0 for every grid type but IQ1_M (which spreads it, below).
struct DAt0 {
  static uint16_t d_bits(const uint8_t* b) { return grid_le16(b); }
};

struct Iq2xxsGrid : DAt0 {  // d, qs[64] at 2: per sub-block 4 grid indices, then 4 x 7 sign bits + ls
  static constexpr int kBytes = 66;
  static constexpr float kFactor = 0.125f;  // db = d * (0.5 + ls) * 0.25 = d * (2 ls + 1) / 8
  static void sub(const uint8_t* b, int sb, GridSub& out) {
    const uint8_t* q = b + 2 + 8 * sb;
    uint32_t s;
    std::memcpy(&s, q + 4, sizeof s);
    for (int k = 0; k < 4; ++k) {
      put_group(out.v + 8 * k, iq::kIq2xxs.v[q[k]], 8, iq::kSigns.v[(s >> (7 * k)) & 127], 0);
    }
    out.scale[0] = out.scale[1] = 2 * static_cast<int32_t>(s >> 28) + 1;
  }
};
struct Iq2xsGrid : DAt0 {  // d at 0, qs[32] uint16 at 2, scales[8] at 66; db = d * (2 ls + 1) / 8
  static constexpr int kBytes = 74;
  static constexpr float kFactor = 0.125f;
  static void sub(const uint8_t* b, int sb, GridSub& out) {
    for (int k = 0; k < 4; ++k) {
      const uint16_t q = grid_le16(b + 2 + 2 * (4 * sb + k));
      put_group(out.v + 8 * k, iq::kIq2xs.v[q & 511], 8, iq::kSigns.v[q >> 9], 0);
    }
    out.scale[0] = 2 * (b[66 + sb] & 0xF) + 1;
    out.scale[1] = 2 * (b[66 + sb] >> 4) + 1;
  }
};
struct Iq2sGrid : DAt0 {  // d, qs[32] at 2, signs[32] at 34, qh[8] at 66, scales[8] at 74
  static constexpr int kBytes = 82;
  static constexpr float kFactor = 0.125f;
  static void sub(const uint8_t* b, int sb, GridSub& out) {
    for (int k = 0; k < 4; ++k) {
      const int idx = b[2 + 4 * sb + k] | (((b[66 + sb] >> (2 * k)) & 3) << 8);
      put_group(out.v + 8 * k, iq::kIq2s.v[idx], 8, b[34 + 4 * sb + k], 0);
    }
    out.scale[0] = 2 * (b[74 + sb] & 0xF) + 1;
    out.scale[1] = 2 * (b[74 + sb] >> 4) + 1;
  }
};
struct Iq3xxsGrid : DAt0 {  // d, qs[64] at 2, sas[32] at 66; db = d * (2 ls + 1) / 4
  static constexpr int kBytes = 98;
  static constexpr float kFactor = 0.25f;
  static void sub(const uint8_t* b, int sb, GridSub& out) {
    uint32_t s;
    std::memcpy(&s, b + 66 + 4 * sb, sizeof s);
    for (int k = 0; k < 4; ++k) {
      const uint8_t signs = iq::kSigns.v[(s >> (7 * k)) & 127];
      put_group(out.v + 8 * k, iq::kIq3xxs.v[b[2 + 8 * sb + 2 * k]], 4, signs, 0);
      put_group(out.v + 8 * k + 4, iq::kIq3xxs.v[b[2 + 8 * sb + 2 * k + 1]], 4, signs, 4);
    }
    out.scale[0] = out.scale[1] = 2 * static_cast<int32_t>(s >> 28) + 1;
  }
};
struct Iq3sGrid : DAt0 {  // d, qs[64] at 2, qh[8] at 66, signs[32] at 74, scales[4] at 106; db = d (2 ls + 1)
  static constexpr int kBytes = 110;
  static constexpr float kFactor = 1.0f;
  static void sub(const uint8_t* b, int sb, GridSub& out) {
    for (int k = 0; k < 4; ++k) {
      for (int h = 0; h < 2; ++h) {
        const int m = 8 * sb + 2 * k + h;
        const int idx = b[2 + m] | (((b[66 + m / 8] >> (m % 8)) & 1) << 8);
        put_group(out.v + 8 * k + 4 * h, iq::kIq3s.v[idx], 4, b[74 + 4 * sb + k], 4 * h);
      }
    }
    out.scale[0] = out.scale[1] = 2 * ((b[106 + sb / 2] >> (4 * (sb % 2))) & 0xF) + 1;
  }
};

// IQ1_S / IQ1_M: x = dl (g + delta), dl = d (2 ls + 1), g in {-1, 0, 1}, delta = +-1/8. Times 8
// it is an integer: 8 x = d (2 ls + 1) (8 g +- 1), so v = 8 g +- 1 (odd, |v| <= 9), scale 2 ls + 1
// and kFactor 1/8: the delta term needs no separate activation sums.
void put_iq1_group(int32_t* v, int index, int32_t delta) {
  for (int t = 0; t < 8; ++t) v[t] = 8 * int32_t{iq::kIq1s.v[index][t]} + delta;
}
struct Iq1sGrid : DAt0 {  // d, qs[32] at 2, qh[8] uint16 at 34: 4 x 3 index bits, ls, delta sign
  static constexpr int kBytes = 50;
  static constexpr float kFactor = 0.125f;
  static void sub(const uint8_t* b, int sb, GridSub& out) {
    const uint16_t h = grid_le16(b + 34 + 2 * sb);
    const int32_t delta = (h & 0x8000) ? -1 : 1;
    for (int k = 0; k < 4; ++k)
      put_iq1_group(out.v + 8 * k, b[2 + 4 * sb + k] | (((h >> (3 * k)) & 7) << 8), delta);
    out.scale[0] = out.scale[1] = 2 * ((h >> 12) & 7) + 1;
  }
};
struct Iq1mGrid {  // qs[32] at 0, qh[16] at 32 (a nibble per group), scales: 4 x uint16 at 48
  static constexpr int kBytes = 56;
  static constexpr float kFactor = 0.125f;
  static uint16_t d_bits(const uint8_t* b) {  // the top nibbles of the 4 scale words
    return static_cast<uint16_t>((grid_le16(b + 48) >> 12) | ((grid_le16(b + 50) >> 12) << 4) |
                                 ((grid_le16(b + 52) >> 12) << 8) | ((grid_le16(b + 54) >> 12) << 12));
  }
  static void sub(const uint8_t* b, int sb, GridSub& out) {
    for (int k = 0; k < 4; ++k) {
      const int m = 4 * sb + k;  // group of 8
      const int nibble = (b[32 + m / 2] >> (4 * (m % 2))) & 0xF;
      put_iq1_group(out.v + 8 * k, b[m] | ((nibble & 7) << 8), (nibble & 8) ? -1 : 1);
    }
    for (int hh = 0; hh < 2; ++hh) {  // half h = 2 sb + hh of 16 elements
      const int h = 2 * sb + hh;
      out.scale[hh] = 2 * ((grid_le16(b + 48 + 2 * (h / 4)) >> (3 * (h % 4))) & 7) + 1;
    }
  }
};

// Per super-block sumi = sum over sub-blocks and halves of scale * dot(v, a); term
// ((da * d) * kFactor) * sumi.
template <class G>
float dot_grid(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = static_cast<const uint8_t*>(w) + b * G::kBytes;
    const BlockQ8_K ab = load_block<BlockQ8_K>(a, b);
    int32_t sumi = 0;
    for (int sb = 0; sb < 8; ++sb) {
      GridSub sub;
      G::sub(wb, sb, sub);
      for (int h = 0; h < 2; ++h) {
        int32_t dot = 0;
        for (int e = 16 * h; e < 16 * h + 16; ++e) dot += sub.v[e] * int32_t{ab.qs[32 * sb + e]};
        sumi += sub.scale[h] * dot;
      }
    }
    sum += ((ab.d * half_to_float(G::d_bits(wb))) * G::kFactor) * static_cast<float>(sumi);
  }
  return sum;
}

// Per super-block: sumq = sum_j sc[j] * dot(q, a over 16-element sub-block j),
// summ = sum_j mn[j] * bsums[j]; term = (da * d) * sumq - (da * dmin) * summ.
float dot_q2_k(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ2_K wb = load_block<BlockQ2_K>(w, b);
    const BlockQ8_K ab = load_block<BlockQ8_K>(a, b);
    int32_t sumq = 0, summ = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t dot = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        const int q = (wb.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        dot += q * int32_t{ab.qs[e]};
      }
      sumq += (wb.scales[j] & 0xF) * dot;
      summ += (wb.scales[j] >> 4) * int32_t{ab.bsums[j]};
    }
    sum += (ab.d * half_to_float(wb.d)) * static_cast<float>(sumq) -
           (ab.d * half_to_float(wb.dmin)) * static_cast<float>(summ);
  }
  return sum;
}

// Per super-block: sumi = sum_j (sc[j] - 32) * dot(q, a over sub-block j), q in -4..3;
// term = (da * d) * sumi.
float dot_q3_k(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ3_K wb = load_block<BlockQ3_K>(w, b);
    const BlockQ8_K ab = load_block<BlockQ8_K>(a, b);
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t dot = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        const int low = (wb.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        const int high = (wb.hmask[e % 32] >> (e / 32)) & 1;
        dot += (low - (high ? 0 : 4)) * int32_t{ab.qs[e]};
      }
      sumi += (unpack_scale_q3_k(j, wb.scales) - 32) * dot;
    }
    sum += (ab.d * half_to_float(wb.d)) * static_cast<float>(sumi);
  }
  return sum;
}

// Per super-block: sumi = sum_j (ls[j] - 32) * dot(kIq4nlValues[q], a over sub-block j of 32);
// term = (da * d) * sumi.
float dot_iq4_xs(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockIQ4_XS wb = load_block<BlockIQ4_XS>(w, b);
    const BlockQ8_K ab = load_block<BlockQ8_K>(a, b);
    int32_t sumi = 0;
    for (int j = 0; j < 8; ++j) {
      const int ls = ((wb.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((wb.scales_h >> (2 * j)) & 3) << 4);
      int32_t dot = 0;
      for (int l = 0; l < 16; ++l) {
        dot += iq::kIq4nlValues[wb.qs[16 * j + l] & 0xF] * int32_t{ab.qs[32 * j + l]};
        dot += iq::kIq4nlValues[wb.qs[16 * j + l] >> 4] * int32_t{ab.qs[32 * j + l + 16]};
      }
      sumi += (ls - 32) * dot;
    }
    sum += (ab.d * half_to_float(wb.d)) * static_cast<float>(sumi);
  }
  return sum;
}

// Per 32-block: sumi = dot(table[q], a); term = (dw * da) * sumi, dw = d (IQ4_NL) or the E8M0
// scale halved (MXFP4, whose table holds twice the E2M1 values).
template <typename Block>
float dot_nl32(const void* w, const void* a, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const Block wb = load_block<Block>(w, b);
    const BlockQ8_0 ab = load_block<BlockQ8_0>(a, b);
    const int8_t* table = iq::kIq4nlValues;
    float dw;
    if constexpr (sizeof(Block) == sizeof(BlockMXFP4)) {
      table = iq::kMxfp4Values;
      dw = std::ldexp(1.0f, wb.e - 128);
    } else {
      dw = half_to_float(wb.d);
    }
    int32_t sumi = 0;
    for (int l = 0; l < 16; ++l) {
      sumi += table[wb.qs[l] & 0xF] * int32_t{ab.qs[l]};
      sumi += table[wb.qs[l] >> 4] * int32_t{ab.qs[l + 16]};
    }
    sum += (dw * half_to_float(ab.d)) * static_cast<float>(sumi);
  }
  return sum;
}

template <float (*Convert)(uint16_t)>
float dot_half(const void* w, const float* x, int64_t k) {
  const uint8_t* p = static_cast<const uint8_t*>(w);
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, sizeof h);
    sum += Convert(h) * x[i];
  }
  return sum;
}

float f16_value(uint16_t h) { return half_to_float(h); }
float bf16_value(uint16_t h) { return bf16_to_fp32(h); }

template <float (*Dot)(const void*, const void*, int64_t)>
void gemm_blocks(const void* weights, int64_t rows, int64_t nb, int64_t wbytes, const void* act,
                 int64_t abytes, int64_t n, float* out, int64_t ldo) {
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* a = static_cast<const uint8_t*>(act);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j)
      out[j * ldo + r] = Dot(w + r * nb * wbytes, a + j * nb * abytes, nb);
}

}  // namespace

void quantize_q8_0(const float* x, int64_t k, void* dst) {
  assert(k % kQK == 0);
  quantize_row(DType::Q8_0, x, dst, k);
}

void quantize_q8_k(const float* x, int64_t k, void* dst) {
  assert(k % kQK_K == 0);
  quantize_row(DType::Q8_K, x, dst, k);
}

void gemm_q8_0(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
               int64_t ldo) {
  assert(k % kQK == 0);
  gemm_blocks<dot_q8_0>(w, rows, k / kQK, sizeof(BlockQ8_0), act, sizeof(BlockQ8_0), n, out, ldo);
}

void gemm_q4_0(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
               int64_t ldo) {
  assert(k % kQK == 0);
  gemm_blocks<dot_q4_0>(w, rows, k / kQK, sizeof(BlockQ4_0), act, sizeof(BlockQ8_0), n, out, ldo);
}

void gemm_q4_k(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
               int64_t ldo) {
  assert(k % kQK_K == 0);
  gemm_blocks<dot_q4_k>(w, rows, k / kQK_K, sizeof(BlockQ4_K), act, sizeof(BlockQ8_K), n, out,
                        ldo);
}

void gemm_q6_k(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
               int64_t ldo) {
  assert(k % kQK_K == 0);
  gemm_blocks<dot_q6_k>(w, rows, k / kQK_K, sizeof(BlockQ6_K), act, sizeof(BlockQ8_K), n, out,
                        ldo);
}

void gemm_q2_k(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
               int64_t ldo) {
  assert(k % kQK_K == 0);
  gemm_blocks<dot_q2_k>(w, rows, k / kQK_K, sizeof(BlockQ2_K), act, sizeof(BlockQ8_K), n, out,
                        ldo);
}

void gemm_q3_k(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
               int64_t ldo) {
  assert(k % kQK_K == 0);
  gemm_blocks<dot_q3_k>(w, rows, k / kQK_K, sizeof(BlockQ3_K), act, sizeof(BlockQ8_K), n, out,
                        ldo);
}

void gemm_iq4_xs(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
                 int64_t ldo) {
  assert(k % kQK_K == 0);
  gemm_blocks<dot_iq4_xs>(w, rows, k / kQK_K, sizeof(BlockIQ4_XS), act, sizeof(BlockQ8_K), n,
                          out, ldo);
}

void gemm_iq4_nl(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
                 int64_t ldo) {
  assert(k % kQK == 0);
  gemm_blocks<dot_nl32<BlockIQ4_NL>>(w, rows, k / kQK, sizeof(BlockIQ4_NL), act,
                                     sizeof(BlockQ8_0), n, out, ldo);
}

// The grid types: rows of super-blocks against Q8_K rows, through dot_grid<Grid>.
template <class Grid>
void gemm_grid(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
               int64_t ldo) {
  assert(k % kQK_K == 0);
  gemm_blocks<dot_grid<Grid>>(w, rows, k / kQK_K, Grid::kBytes, act, sizeof(BlockQ8_K), n, out, ldo);
}

void gemm_iq2_xs(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
              int64_t ldo) {
  gemm_grid<Iq2xsGrid>(w, rows, k, act, n, out, ldo);
}

void gemm_iq2_s(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
              int64_t ldo) {
  gemm_grid<Iq2sGrid>(w, rows, k, act, n, out, ldo);
}

void gemm_iq3_xxs(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
              int64_t ldo) {
  gemm_grid<Iq3xxsGrid>(w, rows, k, act, n, out, ldo);
}

void gemm_iq3_s(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
              int64_t ldo) {
  gemm_grid<Iq3sGrid>(w, rows, k, act, n, out, ldo);
}

void gemm_iq1_s(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
              int64_t ldo) {
  gemm_grid<Iq1sGrid>(w, rows, k, act, n, out, ldo);
}

void gemm_iq1_m(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
              int64_t ldo) {
  gemm_grid<Iq1mGrid>(w, rows, k, act, n, out, ldo);
}

void gemm_iq2_xxs(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
              int64_t ldo) {
  gemm_grid<Iq2xxsGrid>(w, rows, k, act, n, out, ldo);
}

void gemm_mxfp4(const void* w, int64_t rows, int64_t k, const void* act, int64_t n, float* out,
                int64_t ldo) {
  assert(k % kQK == 0);
  gemm_blocks<dot_nl32<BlockMXFP4>>(w, rows, k / kQK, sizeof(BlockMXFP4), act,
                                    sizeof(BlockQ8_0), n, out, ldo);
}

void gemm_f16(const void* w, int64_t rows, int64_t k, const float* x, int64_t n, float* out,
              int64_t ldo) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j)
      out[j * ldo + r] = dot_half<f16_value>(static_cast<const uint8_t*>(w) + r * k * 2, x + j * k, k);
}

void gemm_bf16(const void* w, int64_t rows, int64_t k, const float* x, int64_t n, float* out,
               int64_t ldo) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j)
      out[j * ldo + r] =
          dot_half<bf16_value>(static_cast<const uint8_t*>(w) + r * k * 2, x + j * k, k);
}

}  // namespace cadenza::simd::ref

namespace cadenza::simd::detail {

const KernelTable& scalar_table() {
  static const KernelTable t{"scalar",        ref::quantize_q8_0, ref::quantize_q8_k,
                             ref::gemm_q8_0,  ref::gemm_q4_0,     ref::gemm_q4_k,
                             ref::gemm_q6_k,  ref::gemm_f16,      ref::gemm_bf16,
                             ref::gemm_q2_k,  ref::gemm_q3_k,     ref::gemm_iq4_xs,
                             ref::gemm_iq4_nl, ref::gemm_mxfp4,   ref::gemm_iq2_xxs,
                             ref::gemm_iq2_xs, ref::gemm_iq2_s,   ref::gemm_iq3_xxs,
                             ref::gemm_iq3_s,  ref::gemm_iq1_s,   ref::gemm_iq1_m};
  return t;
}

}  // namespace cadenza::simd::detail
