// Repacking of Q8_0/Q4_0/Q5_0/IQ4_NL/MXFP4/Q4_K/Q5_K/Q6_K rows into 16-row groups, the activation format of the repacked
// kernels, their scalar reference and the dispatch (see repack.h). Baseline x86-64 code.
#include "kernels/simd/repack.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/simd/internal.h"
#include "kernels/simd/kernels.h"
#include "tensor/blocks.h"
#include "tensor/iq_grids.h"
#include "tensor/quant.h"

namespace cadenza::simd {
namespace {

int type_code(DType t) {
  switch (t) {
    case DType::Q8_0: return 0;
    case DType::Q4_0: return 1;
    case DType::Q5_0: return 2;
    case DType::Q4_K: return 3;
    case DType::Q6_K: return 4;
    case DType::IQ4_NL: return 5;
    case DType::MXFP4: return 6;
    case DType::Q5_K: return 7;
    default: return -1;
  }
}

// Elements per block and bytes of one repacked 16-row block.
bool is_k_quant(DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; }
int64_t block_elems(DType t) { return is_k_quant(t) ? 256 : 32; }
int64_t packed_block_bytes(DType t) {
  switch (t) {
    case DType::Q8_0: return 32 + 512;
    case DType::Q4_0: return 32 + 256;
    case DType::Q5_0: return 32 + 256 + 64;
    case DType::Q4_K: return 64 + 128 + 128 + 2048;
    case DType::Q5_K: return 64 + 128 + 128 + 2048 + 512;
    case DType::Q6_K: return 32 + 256 + 2048 + 1024;
    case DType::IQ4_NL: return 32 + 256;
    case DType::MXFP4: return 16 + 256;
    default: return 0;
  }
}

// Q4_K super-block b of a row: codes q[256] (0..15), scales, mins, d, dmin.
void q4_k_codes(const uint8_t* row, int64_t b, uint8_t q[256], int sc[8], int mn[8], uint16_t* d,
                uint16_t* dmin) {
  BlockQ4_K blk;
  std::memcpy(&blk, row + b * sizeof(BlockQ4_K), sizeof blk);
  *d = blk.d;
  *dmin = blk.dmin;
  for (int j = 0; j < 8; ++j) unpack_scale_min_k4(j, blk.scales, &sc[j], &mn[j]);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = blk.qs[32 * c + l] & 0x0f;
      q[64 * c + 32 + l] = blk.qs[32 * c + l] >> 4;
    }
  }
}

// Q5_K super-block b of a row: codes q[256] (0..31), scales, mins, d, dmin.
void q5_k_codes(const uint8_t* row, int64_t b, uint8_t q[256], int sc[8], int mn[8], uint16_t* d,
                uint16_t* dmin) {
  BlockQ5_K blk;
  std::memcpy(&blk, row + b * sizeof(BlockQ5_K), sizeof blk);
  *d = blk.d;
  *dmin = blk.dmin;
  for (int j = 0; j < 8; ++j) unpack_scale_min_k4(j, blk.scales, &sc[j], &mn[j]);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = static_cast<uint8_t>((blk.qs[32 * c + l] & 0x0f) | (((blk.qh[l] >> (2 * c)) & 1) << 4));
      q[64 * c + 32 + l] = static_cast<uint8_t>((blk.qs[32 * c + l] >> 4) | (((blk.qh[l] >> (2 * c + 1)) & 1) << 4));
    }
  }
}

// Q6_K super-block b of a row: codes q[256] (0..63, offset 32), scales, d.
uint16_t q6_k_codes(const uint8_t* row, int64_t b, uint8_t q[256], int8_t sc[16]) {
  BlockQ6_K blk;
  std::memcpy(&blk, row + b * sizeof(BlockQ6_K), sizeof blk);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = blk.ql + 64 * h;
    const uint8_t* qh = blk.qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      q[128 * h + l] = static_cast<uint8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
      q[128 * h + 32 + l] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      q[128 * h + 64 + l] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      q[128 * h + 96 + l] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
  std::memcpy(sc, blk.scales, 16);
  return blk.d;
}

void repack_q6_k_block(const uint8_t* row, int64_t b, int r, uint8_t* blk) {
  uint8_t q[256];
  int8_t sc[16];
  const uint16_t d = q6_k_codes(row, b, q, sc);
  std::memcpy(blk + 2 * r, &d, 2);
  for (int m = 0; m < 8; ++m) {
    blk[32 + 32 * m + 2 * r] = static_cast<uint8_t>(sc[2 * m]);
    blk[32 + 32 * m + 2 * r + 1] = static_cast<uint8_t>(sc[2 * m + 1]);
  }
  for (int p = 0; p < 4; ++p) {
    for (int t = 0; t < 8; ++t) {
      for (int i = 0; i < 4; ++i) {
        const uint8_t lo = q[64 * p + 4 * t + i], hi = q[64 * p + 32 + 4 * t + i];
        blk[288 + 512 * p + 64 * t + 4 * r + i] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        const int shift = t < 4 ? 0 : 4;
        blk[2336 + 256 * p + 64 * (t % 4) + 4 * r + i] |=
            static_cast<uint8_t>((((lo >> 4) & 3) | (((hi >> 4) & 3) << 2)) << shift);
      }
    }
  }
}

// Q4_K, or Q5_K (five_bit): the Q4_K layout of the low 4 bits, then Q5_K's fifth bits as masks.
void repack_q45_k_block(const uint8_t* row, int64_t b, int r, uint8_t* blk, bool five_bit) {
  uint8_t q[256];
  int sc[8], mn[8];
  uint16_t d, dmin;
  if (five_bit)
    q5_k_codes(row, b, q, sc, mn, &d, &dmin);
  else
    q4_k_codes(row, b, q, sc, mn, &d, &dmin);
  std::memcpy(blk + 2 * r, &d, 2);
  std::memcpy(blk + 32 + 2 * r, &dmin, 2);
  for (int j = 0; j < 8; ++j) blk[64 + 16 * j + r] = static_cast<uint8_t>(sc[j]);
  for (int p = 0; p < 4; ++p) {
    blk[192 + 32 * p + 2 * r] = static_cast<uint8_t>(mn[2 * p]);
    blk[192 + 32 * p + 2 * r + 1] = static_cast<uint8_t>(mn[2 * p + 1]);
    for (int t = 0; t < 8; ++t) {
      for (int i = 0; i < 4; ++i) {
        const uint8_t lo = q[64 * p + 4 * t + i], hi = q[64 * p + 32 + 4 * t + i];
        blk[320 + 512 * p + 64 * t + 4 * r + i] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        if (!five_bit) continue;
        // u64 h[p][t][e], bit 4r + i = the fifth bit of q[64p + 32e + 4t + i].
        for (int e = 0; e < 2; ++e) {
          if (((e ? hi : lo) & 0x10) == 0) continue;
          uint8_t* h = blk + 2368 + 128 * p + 16 * t + 8 * e;
          const int bit = 4 * r + i;
          h[bit / 8] = static_cast<uint8_t>(h[bit / 8] | (1u << (bit % 8)));
        }
      }
    }
  }
}

int32_t code_offset(DType t) {
  switch (t) {
    case DType::Q8_0: return 128;
    case DType::Q4_0: return 8;
    case DType::Q5_0: return 16;
    case DType::IQ4_NL:
    case DType::MXFP4: return 128;  // the table value + 128 (code_value)
    default: return 0;  // K-quants handle their offsets/mins per sub-block
  }
}

// Bytes of the 16 row scales at the start of a 32-element type's block.
int64_t scale_bytes(DType t) { return t == DType::MXFP4 ? 16 : 32; }

// The unsigned value (format value + code_offset) of a stored code: the code itself, except for
// the table types, whose 4-bit code indexes the format's value table.
int32_t code_value(DType t, uint8_t code) {
  if (t == DType::IQ4_NL) return iq::kIq4nlValues[code] + 128;
  if (t == DType::MXFP4) return iq::kMxfp4Values[code] + 128;
  return code;
}

// The 32 codes of a 4-bit 32-block (Q4_0's nibble order: element i low nibble of qs[i], i + 16
// the high one).
void split_nibbles(const uint8_t qs[16], uint8_t q[32]) {
  for (int i = 0; i < 16; ++i) {
    q[i] = qs[i] & 0x0f;
    q[i + 16] = qs[i] >> 4;
  }
}

// The stored codes q[32] and the raw scale of block b of a GGUF row (fp16 bits; MXFP4: the
// E8M0 byte). See repack.h for the codes and offsets.
uint16_t block_codes(DType t, const uint8_t* row, int64_t b, uint8_t q[32]) {
  switch (t) {
    case DType::IQ4_NL: {
      BlockIQ4_NL blk;
      std::memcpy(&blk, row + b * sizeof(BlockIQ4_NL), sizeof blk);
      split_nibbles(blk.qs, q);
      return blk.d;
    }
    case DType::MXFP4: {
      BlockMXFP4 blk;
      std::memcpy(&blk, row + b * sizeof(BlockMXFP4), sizeof blk);
      split_nibbles(blk.qs, q);
      return blk.e;
    }
    case DType::Q8_0: {
      BlockQ8_0 blk;
      std::memcpy(&blk, row + b * sizeof(BlockQ8_0), sizeof blk);
      for (int i = 0; i < 32; ++i) q[i] = static_cast<uint8_t>(blk.qs[i] + 128);
      return blk.d;
    }
    case DType::Q4_0: {
      BlockQ4_0 blk;
      std::memcpy(&blk, row + b * sizeof(BlockQ4_0), sizeof blk);
      split_nibbles(blk.qs, q);
      return blk.d;
    }
    case DType::Q5_0: {
      BlockQ5_0 blk;
      std::memcpy(&blk, row + b * sizeof(BlockQ5_0), sizeof blk);
      uint32_t qh;
      std::memcpy(&qh, blk.qh, 4);
      for (int i = 0; i < 16; ++i) {
        q[i] = static_cast<uint8_t>((blk.qs[i] & 0x0f) | (((qh >> i) & 1u) << 4));
        q[i + 16] = static_cast<uint8_t>((blk.qs[i] >> 4) | (((qh >> (i + 16)) & 1u) << 4));
      }
      return blk.d;
    }
    default:
      assert(false);
      return 0;
  }
}

int64_t gguf_row_bytes(DType t, int64_t k) { return static_cast<int64_t>(*row_bytes(t, k)); }

}  // namespace

bool repack_supported(DType type) { return type_code(type) >= 0; }

bool repack_fits(DType type, int64_t k) {
  return repack_supported(type) && k > 0 && k % block_elems(type) == 0;
}

bool repack_usable(DType type, Isa isa) {
  return repack_supported(type) && isa >= Isa::avx512_vnni;
}

int64_t repack_bytes(DType type, int64_t rows, int64_t k) {
  const int64_t groups = (rows + kRepackRows - 1) / kRepackRows;
  return groups * (k / block_elems(type)) * packed_block_bytes(type);
}

void repack_weights(DType type, const void* src, int64_t rows, int64_t k, void* dst) {
  assert(repack_fits(type, k));
  const int64_t nb = k / block_elems(type), rb = gguf_row_bytes(type, k);
  const int64_t bb = packed_block_bytes(type);
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const int64_t groups = (rows + kRepackRows - 1) / kRepackRows;
  std::memset(d, 0, static_cast<size_t>(groups * nb * bb));
  uint8_t q[32];
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = d + (g * nb + b) * bb;
      for (int r = 0; r < kRepackRows; ++r) {
        const int64_t row = g * kRepackRows + r;
        if (is_k_quant(type)) {
          if (row >= rows) continue;  // padding rows: all zero (d = dmin = 0)
          if (type == DType::Q4_K || type == DType::Q5_K)
            repack_q45_k_block(s + row * rb, b, r, blk, type == DType::Q5_K);
          else
            repack_q6_k_block(s + row * rb, b, r, blk);
          continue;
        }
        if (row >= rows) {
          // Padding rows: scale 0 and the codes of zero weights (their outputs are never stored).
          if (type == DType::Q8_0) {
            for (int s8 = 0; s8 < 8; ++s8) std::memset(blk + 32 + s8 * 64 + r * 4, 0x80, 4);
          }
          continue;
        }
        const uint16_t scale = block_codes(type, s + row * rb, b, q);
        if (type == DType::MXFP4)
          blk[r] = static_cast<uint8_t>(scale);
        else
          std::memcpy(blk + 2 * r, &scale, 2);
        if (type == DType::Q8_0) {
          for (int s8 = 0; s8 < 8; ++s8) std::memcpy(blk + 32 + s8 * 64 + r * 4, q + 4 * s8, 4);
          continue;
        }
        const int64_t nib = scale_bytes(type);
        for (int t = 0; t < 4; ++t) {
          for (int i = 0; i < 4; ++i) {
            blk[nib + t * 64 + r * 4 + i] =
                static_cast<uint8_t>((q[4 * t + i] & 0x0f) | ((q[16 + 4 * t + i] & 0x0f) << 4));
          }
        }
        if (type == DType::Q5_0) {
          for (int s8 = 0; s8 < 8; ++s8) {
            uint64_t h;
            std::memcpy(&h, blk + 288 + 8 * s8, 8);
            for (int i = 0; i < 4; ++i) {
              if (q[4 * s8 + i] & 0x10) h |= uint64_t{1} << (4 * r + i);
            }
            std::memcpy(blk + 288 + 8 * s8, &h, 8);
          }
        }
      }
    }
  }
}

int64_t repack_act_row_bytes(DType type, int64_t k) {
  if (type == DType::Q6_K) return k / 256 * static_cast<int64_t>(sizeof(BlockQ8_K));
  return type == DType::Q4_K || type == DType::Q5_K ? k / 256 * (4 + 16 + 256) : k / 32 * (4 + 4 + 32);
}

void repack_quantize_act(DType type, const float* x, int64_t k, void* dst) {
  assert(repack_fits(type, k));
  auto* d = static_cast<uint8_t*>(dst);
  if (type == DType::Q6_K) {
    quantize_q8_k(x, k, dst);  // plain Q8_K rows
    return;
  }
  if (type == DType::Q4_K || type == DType::Q5_K) {
    const int64_t nb = k / 256;
    thread_local std::vector<BlockQ8_K> blocks;
    blocks.resize(static_cast<size_t>(nb));
    quantize_q8_k(x, k, blocks.data());
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8_K& q = blocks[static_cast<size_t>(b)];
      std::memcpy(d + 4 * b, &q.d, 4);
      for (int p = 0; p < 4; ++p) {
        const auto lo = static_cast<int16_t>(q.bsums[4 * p] + q.bsums[4 * p + 1]);
        const auto hi = static_cast<int16_t>(q.bsums[4 * p + 2] + q.bsums[4 * p + 3]);
        const uint32_t pair = static_cast<uint16_t>(lo) | (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16);
        std::memcpy(d + 4 * nb + 16 * b + 4 * p, &pair, 4);
      }
      std::memcpy(d + 20 * nb + 256 * b, q.qs, 256);
    }
    return;
  }
  const int64_t nb = k / 32;
  const int32_t offset = code_offset(type);
  // The whole row through the (dispatched) Q8_0 quantizer, then split into the three arrays.
  thread_local std::vector<uint8_t> tmp;
  tmp.resize(static_cast<size_t>(nb) * sizeof(BlockQ8_0));
  quantize_q8_0(x, k, tmp.data());
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = tmp.data() + b * static_cast<int64_t>(sizeof(BlockQ8_0));
    uint16_t h;
    std::memcpy(&h, blk, 2);
    const float da = fp16_to_fp32(h);
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) sum += static_cast<int8_t>(blk[2 + i]);
    const int32_t corr = offset * sum;
    std::memcpy(d + 4 * b, &da, 4);
    std::memcpy(d + 4 * nb + 4 * b, &corr, 4);
    std::memcpy(d + 8 * nb + 32 * b, blk + 2, 32);
  }
}

void repack_gemm(DType type, const void* packed, int64_t rows, int64_t k, int64_t r0, int64_t r1,
                 const void* act, int64_t n, float* out, int64_t ldo) {
  assert(repack_usable(type, active_isa()) && repack_fits(type, k) && r0 % kRepackRows == 0);
  assert(0 <= r0 && r0 <= r1 && r1 <= rows && n >= 1 && (n == 1 || ldo >= rows));
  (void)rows;
  if (r1 <= r0) return;
  int64_t done = 0;
  // AMX for whole tiles of 16 activation rows, VNNI for the rest: the same numbers either way.
  if (n >= 16 && active_isa() >= Isa::amx)
    done = detail::repack_gemm_amx(type_code(type), packed, k, r0, r1, act, n, out, ldo);
  if (done < n) {
    const auto* a = static_cast<const uint8_t*>(act) + done * repack_act_row_bytes(type, k);
    detail::repack_gemm_vnni(type_code(type), packed, k, r0, r1, a, n - done, out + done * ldo, ldo);
  }
}

namespace ref {
namespace {

// Q4_K, or Q5_K (type): the same sums, codes 0..15 or 0..31.
void repacked_q45_k(DType type, const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
                    float* out, int64_t ldo) {
  const int64_t nb = k / 256, rb = gguf_row_bytes(type, k);
  const int64_t ab = repack_act_row_bytes(type, k);
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* a = static_cast<const uint8_t*>(act);
  uint8_t q[256];
  int sc[8], mn[8];
  uint16_t d, dmin;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      const uint8_t* aj = a + j * ab;
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        if (type == DType::Q5_K)
          q5_k_codes(w + r * rb, b, q, sc, mn, &d, &dmin);
        else
          q4_k_codes(w + r * rb, b, q, sc, mn, &d, &dmin);
        float da;
        std::memcpy(&da, aj + 4 * b, 4);
        const auto* qs = reinterpret_cast<const int8_t*>(aj + 20 * nb + 256 * b);
        int32_t sumq = 0, summ = 0;
        for (int s8 = 0; s8 < 8; ++s8) {
          int32_t dot = 0, sum = 0;
          for (int i = 0; i < 32; ++i) {
            dot += int32_t{q[32 * s8 + i]} * qs[32 * s8 + i];
            sum += qs[32 * s8 + i];
          }
          sumq += sc[s8] * dot;
          summ += mn[s8] * sum;
        }
        acc = std::fma(static_cast<float>(sumq), fp16_to_fp32(d) * da, acc);
        acc = std::fma(-static_cast<float>(summ), fp16_to_fp32(dmin) * da, acc);
      }
      out[j * ldo + r] = acc;
    }
  }
}

void repacked_q6_k(const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
                   float* out, int64_t ldo) {
  const int64_t nb = k / 256, rb = gguf_row_bytes(DType::Q6_K, k);
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* a = static_cast<const uint8_t*>(act);
  uint8_t q[256];
  int8_t sc[16];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint16_t d = q6_k_codes(w + r * rb, b, q, sc);
        BlockQ8_K ab;
        std::memcpy(&ab, a + (j * nb + b) * static_cast<int64_t>(sizeof(BlockQ8_K)), sizeof ab);
        int32_t sumi = 0;
        for (int sb = 0; sb < 16; ++sb) {
          int32_t dot = 0;
          for (int i = 0; i < 16; ++i) dot += (int32_t{q[16 * sb + i]} - 32) * ab.qs[16 * sb + i];
          sumi += sc[sb] * dot;
        }
        acc = std::fma(static_cast<float>(sumi), fp16_to_fp32(d) * ab.d, acc);
      }
      out[j * ldo + r] = acc;
    }
  }
}

}  // namespace

void repack_gemm(DType type, const void* weights, int64_t rows, int64_t k, const void* act,
                 int64_t n, float* out, int64_t ldo) {
  assert(repack_fits(type, k));
  if (type == DType::Q4_K || type == DType::Q5_K) return repacked_q45_k(type, weights, rows, k, act, n, out, ldo);
  if (type == DType::Q6_K) return repacked_q6_k(weights, rows, k, act, n, out, ldo);
  const int64_t nb = k / 32, rb = gguf_row_bytes(type, k), ab = repack_act_row_bytes(type, k);
  const int32_t offset = code_offset(type);
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* a = static_cast<const uint8_t*>(act);
  uint8_t q[32];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      const uint8_t* aj = a + j * ab;
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint16_t scale = block_codes(type, w + r * rb, b, q);
        const float dw = type == DType::MXFP4 ? std::ldexp(1.0f, int{scale} - 128) : fp16_to_fp32(scale);
        float da;
        std::memcpy(&da, aj + 4 * b, 4);
        int32_t sumi = 0;
        for (int i = 0; i < 32; ++i) {
          sumi += (code_value(type, q[i]) - offset) * int32_t{static_cast<int8_t>(aj[8 * nb + 32 * b + i])};
        }
        acc = std::fma(static_cast<float>(sumi), dw * da, acc);
      }
      out[j * ldo + r] = acc;
    }
  }
}

}  // namespace ref
}  // namespace cadenza::simd
