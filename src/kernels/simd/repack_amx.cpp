// AMX-INT8 GEMM over repacked Q8_0/Q4_0/Q5_0/IQ4_NL/MXFP4 weights (layout and math in repack.h),
// for whole tiles of 16 activation rows; the K-quants (Q4_K, Q5_K, Q6_K) are forwarded to
// repack_amx_k.cpp, which folds their sub-block scales into the tiles. Compiled with the avx512
// flags plus -mavx512vnni -mamx-tile -mamx-int8; everything in an anonymous namespace (see
// internal.h).
//
// Why it fits the repacked layout: a block's codes q[s][r][i] = code of w[r][4s+i] are exactly
// an AMX "B" tile of 8 rows x 64 bytes (K = 32 values for 16 columns, 4 bytes per column per
// row), and 16 activation rows' int8 quants of one block, 32 bytes each at the activation row
// stride, are an "A" tile of 16 rows x 32 bytes. Q8_0's stored codes are used in place; the other
// types' 16-row groups are first unpacked once into per-thread scratch (signed values) and
// reused for every tile of activations in the chunk.
//
// One tile op per block gives all 16 x 16 integer sums (Q8_0: tdpbsud on the unsigned codes,
// then minus offset * sum(a) as the VNNI kernel does; the others: tdpbssd on the signed values,
// exact as they are); per activation row j the epilogue is the VNNI kernel's
// acc[j] = fma(float(isum), dw * da_j, acc[j]). The integer parts are exact and the float
// sequence per (row, activation) is the one of repack_gemm_vnni and ref::repack_gemm, so results
// are equal bit for bit whatever n: a batch may mix this kernel (whole tiles of 16) and the VNNI
// one (the rest), and batch invariance holds.
//
// K is 32 per tile op, not the 64 a tile can hold: every block has its own float scale, so the
// tile sums go through memory (tilestored) into a vector epilogue per block, and that epilogue
// (about 3 vector ops per 16 outputs) plus the tile store bound the kernel, not the tile
// multiply (measured in docs/kernels.md, "AMX tiles").
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
  _tile_loadconfig(&kTileConfig);
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
      if constexpr (!codes_in_place<Type>()) {
        unpack_group<Type>(group, nb, unpacked);
      }
      for (int64_t j = c0; j < c1; j += kAmxRows) {
        const uint8_t* aj = a + j * act_row;
        float* oj = out + j * ldo + row;
        group_x16<Type>(group, unpacked, nb, aj, act_row, oj, ldo, mask);
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
    case 3:  // the K-quants: sub-block scales folded into the tiles (repack_amx_k.cpp)
    case 4:
    case 7: return repack_gemm_amx_k(type_code, packed, k, r0, r1, act, n, out, ldo);
    case 5: return gemm<5>(packed, k, r0, r1, act, n, out, ldo);
    case 6: return gemm<6>(packed, k, r0, r1, act, n, out, ldo);
    default: return 0;
  }
}

}  // namespace cadenza::simd::detail
