// AMX-INT8 GEMM over repacked Q8_0/Q4_0/Q5_0/IQ4_NL/MXFP4/Q4_K/Q6_K weights (layout and math in
// repack.h), for whole tiles of 16 activation rows. Compiled with the avx512 flags plus
// -mavx512vnni -mamx-tile -mamx-int8; everything in an anonymous namespace (see internal.h).
//
// Why it fits the repacked layout: a block's codes q[s][r][i] = code of w[r][4s+i] are exactly
// an AMX "B" tile of 8 rows x 64 bytes (K = 32 values for 16 columns, 4 bytes per column per
// row), and 16 activation rows' int8 quants of one block, 32 bytes each at the activation row
// stride, are an "A" tile of 16 rows x 32 bytes. Q8_0's stored codes are used in place; the other
// types' 16-row groups are first unpacked once into per-thread scratch (signed values for the
// nibble types, codes for the K-quants) and reused for every tile of activations in the chunk.
//
// 32-element types: one tile op per block gives all 16 x 16 integer sums (Q8_0: tdpbsud on the
// unsigned codes, then minus offset * sum(a) as the VNNI kernel does; the others: tdpbssd on the
// signed values, exact as they are); per activation row j the epilogue is the VNNI kernel's
// acc[j] = fma(float(isum), dw * da_j, acc[j]). Q4_K / Q6_K: one tdpbsud per sub-block (32 / 16
// elements: codes are unsigned), sumq = sum of tile sums times the sub-block scales (int32),
// the min / offset term and the final fmas as the VNNI kernel has them. The integer parts are
// exact and the float sequence per (row, activation) is the one of repack_gemm_vnni and
// ref::repack_gemm, so results are equal bit for bit whatever n: a batch may mix this kernel
// (whole tiles of 16) and the VNNI one (the rest), and batch invariance holds.
//
// K is 32 per tile op (16 for Q6_K), not the 64 a tile can hold: every block has its own scale,
// so the tile sums go through memory (tilestored) into a vector epilogue per block, and that
// epilogue (about 3 vector ops per 16 outputs) plus the tile store bound the kernel, not the
// tile multiply (measured in docs/kernels.md, "AMX tiles").
//
// Tiles: 0, 1 accumulators (16 x 16 int32); 2, 3 activations (16 x 32 bytes); 4, 5 codes
// (8 x 64 bytes); two of each so that the next block's tile op is issued before this block's
// epilogue reads its sums.
#include "kernels/simd/intrinsics.h"

#include <cstdint>
#include <cstdlib>

#include "kernels/simd/amx_tile_config.h"
#include "kernels/simd/internal.h"
#include "tensor/iq_grids.h"

namespace cadenza::simd::detail {
namespace {

#include "kernels/simd/repack_blocks.inc"

constexpr int kAmxRows = 16;  // activation rows per tile

// In read-only data (amx_tile_config.h says why).
constexpr TileConfig make_tile_config() {
  TileConfig cfg = full_tiles_config(2);          // C: 16 activations x 16 rows, int32
  for (int t = 0; t < 2; ++t) {
    cfg.rows[2 + t] = 16, cfg.colsb[2 + t] = 32;  // A: 16 activations x 32 quants
    cfg.rows[4 + t] = 8, cfg.colsb[4 + t] = 64;   // B: 8 x (16 rows x 4 codes)
  }
  return cfg;
}
constexpr TileConfig kTileConfig = make_tile_config();

// Q6_K's sub-blocks are 16 elements: A tiles of 16 bytes a row, B tiles of 4 rows.
constexpr TileConfig make_q6_k_tile_config() {
  TileConfig cfg = make_tile_config();
  for (int t = 0; t < 2; ++t) cfg.colsb[2 + t] = 16, cfg.rows[4 + t] = 4;
  return cfg;
}
constexpr TileConfig kQ6KTileConfig = make_q6_k_tile_config();

void load_tile_config(int type) { _tile_loadconfig(type == 4 ? &kQ6KTileConfig : &kTileConfig); }

// Per-thread scratch for one group's unpacked codes (nb blocks x 512 bytes). Grows, never shrinks;
// freed when the thread exits.
struct Scratch {
  uint8_t* data = nullptr;
  int64_t capacity = 0;
  ~Scratch() { std::free(data); }
  uint8_t* get(int64_t bytes) {
    if (bytes > capacity) {
      std::free(data);
      const int64_t rounded = (bytes + 4095) / 4096 * 4096;
      data = static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>(rounded)));
      capacity = data ? rounded : 0;
    }
    return data;
  }
};
thread_local Scratch tl_scratch;

// Q8_0's stored codes are its B tiles as they are (unsigned, read in place); the other 32-element
// types' are unpacked to signed values first (unpack_group).
template <int Type>
constexpr bool codes_in_place() { return Type == 0; }

// The float epilogue of one block for 16 activation rows: c = the tile's 16 x 16 int32 sums. With
// signed codes they are exact, sum(w * a); with Q8_0's stored unsigned codes they are sum(q * a)
// and lose offset * sum(a) here, as the VNNI kernel does.
template <int Type>
inline void block_epilogue(const int32_t* c, const uint8_t* blk, const uint8_t* act, int64_t act_row,
                           int64_t nb, int64_t b, __m512* acc) {
  const __m512 dw = block_scales<Type>(blk);
#pragma GCC unroll 16
  for (int j = 0; j < kAmxRows; ++j) {
    const uint8_t* aj = act + j * act_row;
    float da;
    __builtin_memcpy(&da, aj + 4 * b, 4);
    __m512i isum = _mm512_load_si512(c + 16 * j);
    if constexpr (codes_in_place<Type>()) isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(ld32(aj + 4 * nb + 4 * b)));
    acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(da)), acc[j]);
  }
}

// Block b's tile op into accumulator tile C (through A and B), stored to buf.
#define CADENZA_AMX_BLOCK(C, A, B, b, buf)                   \
  do {                                                       \
    _tile_loadd(A, qs + 32 * (b), act_row);                  \
    _tile_loadd(B, codes + codes_stride * (b), 64);          \
    _tile_zero(C);                                           \
    if constexpr (codes_in_place<Type>())                    \
      _tile_dpbsud(C, A, B);                                 \
    else                                                     \
      _tile_dpbssd(C, A, B);                                 \
    _tile_stored(C, buf, 64);                                \
  } while (0)

// One 16-row group against 16 activation rows starting at `act`. Block b's B tile: Q8_0's own
// codes in the repacked block, or the group's unpacked signed codes at unpacked + 512 b.
// Software-pipelined: block b + 1's tile op is issued and stored before block b's epilogue reads
// its sums, so the tile unit and the vector units can overlap.
template <int Type>
inline void group_x16(const uint8_t* group, const uint8_t* unpacked, int64_t nb, const uint8_t* act,
                      int64_t act_row, float* out, int64_t ldo, __mmask16 mask) {
  alignas(64) int32_t c0[256];
  alignas(64) int32_t c1[256];
  __m512 acc[kAmxRows];
  for (int j = 0; j < kAmxRows; ++j) acc[j] = _mm512_setzero_ps();
  const uint8_t* qs = act + 8 * nb;  // block b's quants at qs + 32 b, rows act_row apart
  constexpr int64_t bb = block_bytes(Type);
  const uint8_t* codes = codes_in_place<Type>() ? group + 32 : unpacked;  // Q8_0: after the scales
  const int64_t codes_stride = codes_in_place<Type>() ? bb : 512;
  CADENZA_AMX_BLOCK(0, 2, 4, 0, c0);
  for (int64_t b = 0; b < nb; b += 2) {
    if (b + 1 < nb) CADENZA_AMX_BLOCK(1, 3, 5, b + 1, c1);
    block_epilogue<Type>(c0, group + b * bb, act, act_row, nb, b, acc);
    if (b + 1 >= nb) break;
    if (b + 2 < nb) CADENZA_AMX_BLOCK(0, 2, 4, b + 2, c0);
    block_epilogue<Type>(c1, group + (b + 1) * bb, act, act_row, nb, b + 1, acc);
  }
  for (int j = 0; j < kAmxRows; ++j) _mm512_mask_storeu_ps(out + j * ldo, mask, acc[j]);
}
#undef CADENZA_AMX_BLOCK

// The signed codes (value = code - offset) of one 32-element-type group: block b's B tile at
// dst + 512 b.
template <int Type>
inline void unpack_group(const uint8_t* group, int64_t nb, uint8_t* dst) {
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(Type == 1 ? 8 : Type == 2 ? 16 : 128));
  for (int64_t b = 0; b < nb; ++b) {
    __m512i wv[8];
    weight_vectors<Type>(group + b * block_bytes(Type), wv);
    for (int s = 0; s < 8; ++s) _mm512_store_si512(dst + 512 * b + 64 * s, _mm512_sub_epi8(wv[s], offset));
  }
}

// One K-quant sub-block's tile sums into the super-block's integer sums: sumq[j] += c[j] * sc for
// the 16 activation rows j (lanes: the 16 weight rows; sc: the sub-block's scales as int32).
// Always inlined, so sumq stays in registers.
__attribute__((always_inline)) inline void add_scaled_sums(const int32_t* c, __m512i sc, __m512i* sumq) {
#pragma GCC unroll 16
  for (int j = 0; j < kAmxRows; ++j)
    sumq[j] = _mm512_add_epi32(sumq[j], _mm512_mullo_epi32(_mm512_load_si512(c + 16 * j), sc));
}

// Q4_K: one 16-row group against 16 activation rows, per super-block of 256 (layout in repack.h).
// `codes` holds the group's unpacked 4-bit codes, per super-block 8 sub-blocks x 512 bytes (the
// B tile of sub-block s: 8 rows of 16 rows x 4 codes). Per activation row j and super-block:
// sumq = sum_s sc_s * (q . a)_s from the tile sums (exact int32), summ = sum_s mn_s * sum(a)_s
// as the VNNI kernel computes it, then the same two fmas. The integer sums do not depend on the
// order they are added in, so this equals the VNNI kernel bit for bit.
inline void q4_k_group_x16(const uint8_t* group, const uint8_t* codes, int64_t nb, const uint8_t* act,
                           int64_t act_row, float* out, int64_t ldo, __mmask16 mask) {
  alignas(64) int32_t c[2][256];
  alignas(64) float acc[kAmxRows][16];
  for (int j = 0; j < kAmxRows; ++j) _mm512_store_ps(acc[j], _mm512_setzero_ps());
  const uint8_t* qs = act + 20 * nb;  // super-block b, sub-block s: qs + 256 b + 32 s
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * 2368;
    const uint8_t* bcodes = codes + b * 4096;
    __m512i sumq[kAmxRows];
    for (int j = 0; j < kAmxRows; ++j) sumq[j] = _mm512_setzero_si512();
    for (int s = 0; s < 8; s += 2) {
      _tile_loadd(2, qs + 256 * b + 32 * s, act_row);
      _tile_loadd(4, bcodes + 512 * s, 64);
      _tile_zero(0);
      _tile_dpbsud(0, 2, 4);
      _tile_loadd(3, qs + 256 * b + 32 * (s + 1), act_row);
      _tile_loadd(5, bcodes + 512 * (s + 1), 64);
      _tile_zero(1);
      _tile_dpbsud(1, 3, 5);
      _tile_stored(0, c[0], 64);
      const __m512i sc0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 64 + 16 * s)));
      add_scaled_sums(c[0], sc0, sumq);
      _tile_stored(1, c[1], 64);
      const __m512i sc1 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 80 + 16 * s)));
      add_scaled_sums(c[1], sc1, sumq);
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
    __m512i mnv[4];
    for (int p = 0; p < 4; ++p)
      mnv[p] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 192 + 32 * p)));
    for (int j = 0; j < kAmxRows; ++j) {
      const uint8_t* aj = act + j * act_row;
      __m512i summ = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p)
        summ = _mm512_dpwssd_epi32(summ, mnv[p], _mm512_set1_epi32(ld32(aj + 4 * nb + 16 * b + 4 * p)));
      float da;
      __builtin_memcpy(&da, aj + 4 * b, 4);
      const __m512 vda = _mm512_set1_ps(da);
      __m512 a = _mm512_load_ps(acc[j]);
      a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumq[j]), _mm512_mul_ps(d, vda), a);
      a = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(dmin, vda), a);
      _mm512_store_ps(acc[j], a);
    }
  }
  for (int j = 0; j < kAmxRows; ++j) _mm512_mask_storeu_ps(out + j * ldo, mask, _mm512_load_ps(acc[j]));
}

// Unpacks one Q4_K group's nibbles: super-block b, sub-block s (2p low nibbles, 2p+1 high) to
// dst + 4096 b + 512 s.
inline void q4_k_unpack_group(const uint8_t* group, int64_t nb, uint8_t* dst) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* nib = group + b * 2368 + 320;
    uint8_t* d = dst + 4096 * b;
    for (int p = 0; p < 4; ++p) {
      for (int t = 0; t < 8; ++t) {
        const __m512i v = _mm512_loadu_si512(nib + 512 * p + 64 * t);
        _mm512_store_si512(d + 512 * (2 * p) + 64 * t, _mm512_and_si512(v, m4));
        _mm512_store_si512(d + 512 * (2 * p + 1) + 64 * t, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
      }
    }
  }
}


// Q6_K: one 16-row group against 16 activation rows (plain Q8_K rows), per super-block of 256.
// `codes` holds the group's unpacked 6-bit codes (0..63), per super-block 16 sub-blocks x 256
// bytes (the B tile of sub-block s: 4 rows of 16 rows x 4 codes). Per activation row j and
// super-block: sumq = sum_s sc_s * (q . a)_s from the tile sums, summ = sum_s sc_s * sum(a)_s as
// the VNNI kernel computes it, isum = sumq - 32 summ, then the VNNI kernel's fma.
inline void q6_k_group_x16(const uint8_t* group, const uint8_t* codes, int64_t nb, const uint8_t* act,
                           int64_t act_row, float* out, int64_t ldo, __mmask16 mask) {
  alignas(64) int32_t c[2][256];
  alignas(64) float acc[kAmxRows][16];
  for (int j = 0; j < kAmxRows; ++j) _mm512_store_ps(acc[j], _mm512_setzero_ps());
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * 3360;
    const uint8_t* bcodes = codes + b * 4096;
    const uint8_t* qs = act + 292 * b + 4;  // sub-block s: qs + 16 s, rows act_row apart
    __m512i sumq[kAmxRows];
    for (int j = 0; j < kAmxRows; ++j) sumq[j] = _mm512_setzero_si512();
    for (int m = 0; m < 8; ++m) {  // sub-blocks 2m, 2m + 1
      _tile_loadd(2, qs + 32 * m, act_row);
      _tile_loadd(4, bcodes + 512 * m, 64);
      _tile_zero(0);
      _tile_dpbsud(0, 2, 4);
      _tile_loadd(3, qs + 32 * m + 16, act_row);
      _tile_loadd(5, bcodes + 512 * m + 256, 64);
      _tile_zero(1);
      _tile_dpbsud(1, 3, 5);
      const __m512i pv = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32 + 32 * m)));
      const __m512i sc0 = _mm512_srai_epi32(_mm512_slli_epi32(pv, 16), 16), sc1 = _mm512_srai_epi32(pv, 16);
      _tile_stored(0, c[0], 64);
      add_scaled_sums(c[0], sc0, sumq);
      _tile_stored(1, c[1], 64);
      add_scaled_sums(c[1], sc1, sumq);
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    __m512i pv[8];
    for (int m = 0; m < 8; ++m)
      pv[m] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32 + 32 * m)));
    for (int j = 0; j < kAmxRows; ++j) {
      const uint8_t* aj = act + j * act_row + 292 * b;
      __m512i summ = _mm512_setzero_si512();
      for (int m = 0; m < 8; ++m) summ = _mm512_dpwssd_epi32(summ, pv[m], _mm512_set1_epi32(ld32(aj + 260 + 4 * m)));
      float da;
      __builtin_memcpy(&da, aj, 4);
      const __m512i isum = _mm512_sub_epi32(sumq[j], _mm512_slli_epi32(summ, 5));
      _mm512_store_ps(acc[j], _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(da)),
                                              _mm512_load_ps(acc[j])));
    }
  }
  for (int j = 0; j < kAmxRows; ++j) _mm512_mask_storeu_ps(out + j * ldo, mask, _mm512_load_ps(acc[j]));
}

// Unpacks one Q6_K group's codes (0..63): super-block b, 32-element chunk c (2p: the low nibbles
// of quarter p, 2p + 1: the high ones), row t to dst + 4096 b + 512 c + 64 t; sub-block s is then
// the 256 bytes at dst + 4096 b + 256 s.
inline void q6_k_unpack_group(const uint8_t* group, int64_t nb, uint8_t* dst) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m03 = _mm512_set1_epi8(0x03), m0c = _mm512_set1_epi8(0x0c);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * 3360;
    uint8_t* d = dst + 4096 * b;
    for (int p = 0; p < 4; ++p) {
      for (int t = 0; t < 8; ++t) {
        const __m512i v = _mm512_loadu_si512(blk + 288 + 512 * p + 64 * t);
        __m512i h = _mm512_loadu_si512(blk + 2336 + 256 * p + 64 * (t & 3));
        if (t >= 4) h = _mm512_srli_epi16(h, 4);
        const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_slli_epi16(_mm512_and_si512(h, m03), 4));
        const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                           _mm512_slli_epi16(_mm512_and_si512(h, m0c), 2));
        _mm512_store_si512(d + 512 * (2 * p) + 64 * t, lo);
        _mm512_store_si512(d + 512 * (2 * p + 1) + 64 * t, hi);
      }
    }
  }
}

// Activation rows [0, n16) in whole tiles of 16; returns n16. The rest goes to the VNNI kernel:
// a tile op on fewer rows costs about what a full one does, and for tails of 4..12 rows the VNNI
// kernel measured as fast or faster for every type (bench_simd prefill/*/amx/n4..n12 with tails
// on AMX, medians of 5, before they were taken out).
template <int Type>
int64_t gemm(const void* packed, int64_t k, int64_t r0, int64_t r1, const void* act, int64_t n,
             float* out, int64_t ldo) {
  const int64_t n16 = n / kAmxRows * kAmxRows;
  if (n16 == 0) return 0;
  const int64_t nb = k / block_elems(Type);
  constexpr int64_t bb = block_bytes(Type);
  const int64_t group_bytes = nb * bb;
  const int64_t act_row = nb * act_bytes_per_block(Type);
  const auto* w = static_cast<const uint8_t*>(packed);
  const auto* a = static_cast<const uint8_t*>(act);
  // 16 rows x k codes, one byte each, for the types that unpack (not Q8_0).
  uint8_t* unpacked = nullptr;
  if constexpr (!codes_in_place<Type>()) {
    unpacked = tl_scratch.get(16 * k);
    if (!unpacked) return 0;  // no scratch: the VNNI kernel computes the same numbers
  }
  load_tile_config(Type);
  const int64_t g0 = r0 / 16, g1 = (r1 + 15) / 16;
  // Activation chunk: whole tiles that stay in L1 (48 KiB on the AMX parts) next to the group's
  // codes while every group of the range passes over them; the weights then stream from L2/L3
  // once per chunk. Measured on a 4864 x 896 matrix at n = 512 (bench_simd, medians of 3): Q8_0
  // 110 G MAC/s with 512 KiB chunks, 150 with 128, 177 with 64, 223 with 32; the unpacking types
  // pay their unpacking once per group and chunk and do best at 48-64 KiB.
  const int64_t chunk_bytes = codes_in_place<Type>() ? 32 * 1024 : 64 * 1024;
  int64_t chunk = (chunk_bytes / act_row) / kAmxRows * kAmxRows;
  if (chunk < kAmxRows) chunk = kAmxRows;
  for (int64_t c0 = 0; c0 < n16; c0 += chunk) {
    const int64_t c1 = c0 + chunk < n16 ? c0 + chunk : n16;
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t row = g * 16;
      const int64_t valid = r1 - row < 16 ? r1 - row : 16;
      const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1u);
      const uint8_t* group = w + g * group_bytes;
      if constexpr (Type == 3) {
        q4_k_unpack_group(group, nb, unpacked);
      } else if constexpr (Type == 4) {
        q6_k_unpack_group(group, nb, unpacked);
      } else if constexpr (!codes_in_place<Type>()) {
        unpack_group<Type>(group, nb, unpacked);
      }
      for (int64_t j = c0; j < c1; j += kAmxRows) {
        const uint8_t* aj = a + j * act_row;
        float* oj = out + j * ldo + row;
        if constexpr (Type == 3) {
          q4_k_group_x16(group, unpacked, nb, aj, act_row, oj, ldo, mask);
        } else if constexpr (Type == 4) {
          q6_k_group_x16(group, unpacked, nb, aj, act_row, oj, ldo, mask);
        } else {
          group_x16<Type>(group, unpacked, nb, aj, act_row, oj, ldo, mask);
        }
      }
    }
  }
  _tile_release();
  return n16;
}

}  // namespace

int64_t repack_gemm_amx(int type_code, const void* packed, int64_t k, int64_t r0, int64_t r1,
                        const void* act, int64_t n, float* out, int64_t ldo) {
  switch (type_code) {
    case 0: return gemm<0>(packed, k, r0, r1, act, n, out, ldo);
    case 1: return gemm<1>(packed, k, r0, r1, act, n, out, ldo);
    case 2: return gemm<2>(packed, k, r0, r1, act, n, out, ldo);
    case 3: return gemm<3>(packed, k, r0, r1, act, n, out, ldo);
    case 4: return gemm<4>(packed, k, r0, r1, act, n, out, ldo);
    case 5: return gemm<5>(packed, k, r0, r1, act, n, out, ldo);
    case 6: return gemm<6>(packed, k, r0, r1, act, n, out, ldo);
    default: return 0;
  }
}

}  // namespace cadenza::simd::detail
