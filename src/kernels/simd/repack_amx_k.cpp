// AMX-INT8 GEMM over repacked K-quant weights (Q4_K, Q5_K, Q6_K; layouts and math in repack.h)
// with the sub-block scales folded into the B tiles, for whole tiles of 16 activation rows.
// Compiled with the avx512 flags plus -mavx512vnni -mamx-tile -mamx-int8; everything in an
// anonymous namespace (see internal.h).
//
// Why folding: a K-quant super-block has 8 (Q4_K, Q5_K) or 16 (Q6_K) sub-blocks, each with its
// own integer scale per weight row. Applying the scale after the tile product needs one tile op
// per sub-block (K = 32 or 16 of the 64 a tile holds), a tile store and a vpmulld epilogue per
// sub-block: for Q6_K 16 stores and 256 vpmulld per super-block and 16 x 16 outputs, twice
// Q8_0's epilogue per element, and the kernel ran at about 0.6x Q8_0. Instead, per 16-row group
// the integer weight P = sc * (q - offset) (Q6_K: sc in -128..127, q - 32 in -32..31, so P in
// -4064..4096; Q4_K / Q5_K: P = sc * q in 0..945 / 0..1953, the mins stay apart) is split
// exactly as P = 128 H + L with L = P & 127 in 0..127 and H = P >> 7 in -32..32, both int8.
// Then the super-block's integer sum is
//   sumi = sum_i P_i a_i = 128 * sum_i H_i a_i + sum_i L_i a_i
// and both sums are plain tdpbssd products with K = 64, accumulated in two tiles over the whole
// super-block: 8 tile ops, 2 tile stores and one float epilogue per super-block and 16 x 16
// outputs (Q8_0: 8 tile ops of K = 32, 8 stores, 8 epilogues for the same 256 elements).
// sumi is the exact integer the VNNI kernel and ref::repack_gemm compute (Q6_K: sumq - 32 summ;
// Q4_K / Q5_K: sumq), and the float epilogue is theirs, so results are equal bit for bit.
//
// The H / L tiles are built per group into per-thread scratch (8 KiB per super-block: 4 chunks
// of 64 elements x (H, L) x 16 x 64 bytes) once per activation chunk, and serve every tile of
// 16 activation rows in the chunk; chunks are sized so that the activations stay in L2 and the
// building is paid once per 16 rows x ~kChunkBytes of activations.
//
// Tiles: 0..3 accumulators (H and L sums of two tiles of activations), 4, 5 activations
// (16 x 64 bytes), 6, 7 the H and L weights (16 x 64 bytes: 16 rows x 4 values per tile row).
#include "kernels/simd/intrinsics.h"

#include <cstdint>
#include <cstdlib>

#include "kernels/simd/amx_tile_config.h"
#include "kernels/simd/internal.h"
#include "tensor/iq_grids.h"

namespace cadenza::simd::detail {
namespace {

#include "kernels/simd/repack_blocks.inc"

constexpr int kAmxRows = 16;                 // activation rows per tile
constexpr int64_t kFoldedBlockBytes = 8192;  // one super-block's H and L tiles
// Activation bytes per chunk (each group's folded tiles are built once per chunk, about 10 vector
// ops per 64 codes, so a chunk should hold many tiles); it stays in L2 (2 MiB per core on the AMX
// parts) next to the folded group. Chosen in bench_simd on Q6_K (docs/kernels.md): 768 KiB beat
// 64 and 256 KiB clearly and 1536 KiB about equally.
constexpr int64_t kChunkBytes = 768 * 1024;

constexpr TileConfig kTileConfig = full_tiles_config(8);

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

// Folds 64 codes (16 rows x 4, unsigned 0..63) with per-row scales into H and L (64 bytes each).
// se / so: the row's scale in the even / odd bytes of each 16-bit lane (zero in the others), as
// vpmaddubsw wants them; off: the per-lane offset term sc * offset (16-bit), subtracted.
__attribute__((always_inline)) inline void fold(__m512i codes, __m512i se, __m512i so, __m512i off,
                                                uint8_t* h, uint8_t* l) {
  const __m512i pe = _mm512_sub_epi16(_mm512_maddubs_epi16(codes, se), off);  // even bytes' P
  const __m512i po = _mm512_sub_epi16(_mm512_maddubs_epi16(codes, so), off);  // odd bytes' P
  constexpr __mmask64 odd = 0xAAAAAAAAAAAAAAAAull;
  // H = P >> 7 (bits 7..14 of P): the low byte of pe >> 7, the high byte of po << 1.
  const __m512i hv = _mm512_mask_blend_epi8(odd, _mm512_srli_epi16(pe, 7), _mm512_slli_epi16(po, 1));
  // L = P & 127: the low bytes of pe and po.
  const __m512i lv = _mm512_and_si512(_mm512_mask_blend_epi8(odd, pe, _mm512_slli_epi16(po, 8)),
                                      _mm512_set1_epi8(0x7f));
  _mm512_store_si512(h, hv);
  _mm512_store_si512(l, lv);
}

// Scale patterns from 16 unsigned-or-signed scale bytes of one sub-block, one per row, widened to
// 32-bit lanes (lane r = row r's scale, only its low byte used): even / odd byte patterns.
__attribute__((always_inline)) inline void scale_patterns(__m512i s32, __m512i* se, __m512i* so) {
  const __m512i b = _mm512_and_si512(s32, _mm512_set1_epi32(0xff));
  *se = _mm512_or_si512(b, _mm512_slli_epi32(b, 16));
  *so = _mm512_slli_epi32(*se, 8);
}

// Q6_K: folds one group's super-block (3360 bytes, layout in repack.h) into dst (8 KiB): chunk p
// (elements 64p..64p+63) at dst + 2048 p, H tile then L tile; tile row kk holds elements
// 64p + 4kk .. +3 of the 16 rows. P = sc * (q - 32).
inline void q6_k_fold(const uint8_t* blk, uint8_t* dst) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m03 = _mm512_set1_epi8(0x03), m0c = _mm512_set1_epi8(0x0c);
  // Per sub-block s (16 elements): patterns and the offset term 32 sc in each 16-bit lane.
  __m512i se[16], so[16], off[16];
  for (int m = 0; m < 8; ++m) {
    // Signed scales of sub-blocks 2m (low word) and 2m + 1 (high word) in 32-bit lane r.
    const __m512i pv = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32 + 32 * m)));
    scale_patterns(pv, &se[2 * m], &so[2 * m]);
    scale_patterns(_mm512_srli_epi32(pv, 16), &se[2 * m + 1], &so[2 * m + 1]);
    const __m512i x32 = _mm512_slli_epi16(pv, 5);  // 32 sc per 16-bit lane
    off[2 * m] = _mm512_or_si512(_mm512_and_si512(x32, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(x32, 16));
    off[2 * m + 1] = _mm512_or_si512(_mm512_srli_epi32(x32, 16), _mm512_and_si512(x32, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  for (int p = 0; p < 4; ++p) {
    uint8_t* d = dst + 2048 * p;
    for (int t = 0; t < 8; ++t) {
      const __m512i v = _mm512_loadu_si512(blk + 288 + 512 * p + 64 * t);
      __m512i h = _mm512_loadu_si512(blk + 2336 + 256 * p + 64 * (t & 3));
      if (t >= 4) h = _mm512_srli_epi16(h, 4);
      const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_slli_epi16(_mm512_and_si512(h, m03), 4));
      const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                         _mm512_slli_epi16(_mm512_and_si512(h, m0c), 2));
      const int slo = 4 * p + t / 4, shi = 4 * p + 2 + t / 4;  // sub-blocks of lo and hi
      fold(lo, se[slo], so[slo], off[slo], d + 64 * t, d + 1024 + 64 * t);
      fold(hi, se[shi], so[shi], off[shi], d + 64 * (8 + t), d + 1024 + 64 * (8 + t));
    }
  }
}

// Q4_K (Q5 = false) / Q5_K (Q5 = true): folds one group's super-block (2368 / 2880 bytes) into
// dst as q6_k_fold does, P = sc * q (the mins are applied in the epilogue).
template <bool Q5>
inline void q45_k_fold(const uint8_t* blk, uint8_t* dst) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), bit4 = _mm512_set1_epi8(0x10), zero = _mm512_setzero_si512();
  for (int p = 0; p < 4; ++p) {
    __m512i se0, so0, se1, so1;
    scale_patterns(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 64 + 32 * p))), &se0, &so0);
    scale_patterns(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 80 + 32 * p))), &se1, &so1);
    uint8_t* d = dst + 2048 * p;
    for (int t = 0; t < 8; ++t) {
      const __m512i v = _mm512_loadu_si512(blk + 320 + 512 * p + 64 * t);
      __m512i lo = _mm512_and_si512(v, m4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      if constexpr (Q5) {
        uint64_t h0, h1;
        __builtin_memcpy(&h0, blk + 2368 + 128 * p + 16 * t, 8);
        __builtin_memcpy(&h1, blk + 2368 + 128 * p + 16 * t + 8, 8);
        lo = _mm512_mask_add_epi8(lo, _cvtu64_mask64(h0), lo, bit4);
        hi = _mm512_mask_add_epi8(hi, _cvtu64_mask64(h1), hi, bit4);
      }
      fold(lo, se0, so0, zero, d + 64 * t, d + 1024 + 64 * t);
      fold(hi, se1, so1, zero, d + 64 * (8 + t), d + 1024 + 64 * (8 + t));
    }
  }
}

// Type codes (repack_blocks.inc): 3 Q4_K, 4 Q6_K, 7 Q5_K.
template <int Type>
inline void fold_group(const uint8_t* group, int64_t nb, uint8_t* dst) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * block_bytes(Type);
    if constexpr (Type == 4)
      q6_k_fold(blk, dst + kFoldedBlockBytes * b);
    else
      q45_k_fold<Type == 7>(blk, dst + kFoldedBlockBytes * b);
  }
}

// The float epilogue of one super-block for one tile of 16 activation rows: c = its H sums then
// its L sums (2 x 16 x 16 int32); acc[j] for activation row j (lanes: the 16 weight rows).
template <int Type>
__attribute__((always_inline)) inline void epilogue(const int32_t* c, const uint8_t* blk, const uint8_t* act,
                                                    int64_t act_row, int64_t nb, int64_t b, __m512* acc) {
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
  if constexpr (Type == 4) {
#pragma GCC unroll 16
    for (int j = 0; j < kAmxRows; ++j) {
      const uint8_t* aj = act + j * act_row + 292 * b;
      float da;
      __builtin_memcpy(&da, aj, 4);
      const __m512i isum = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c + 16 * j), 7),
                                            _mm512_load_si512(c + 256 + 16 * j));
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(da)), acc[j]);
    }
  } else {
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
    __m512i mnv[4];
    for (int p = 0; p < 4; ++p)
      mnv[p] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 192 + 32 * p)));
#pragma GCC unroll 16
    for (int j = 0; j < kAmxRows; ++j) {
      const uint8_t* aj = act + j * act_row;
      __m512i summ = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p)
        summ = _mm512_dpwssd_epi32(summ, mnv[p], _mm512_set1_epi32(ld32(aj + 4 * nb + 16 * b + 4 * p)));
      float da;
      __builtin_memcpy(&da, aj + 4 * b, 4);
      const __m512 vda = _mm512_set1_ps(da);
      const __m512i sumq = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c + 16 * j), 7),
                                            _mm512_load_si512(c + 256 + 16 * j));
      __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumq), _mm512_mul_ps(d, vda), acc[j]);
      acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), _mm512_mul_ps(dmin, vda), a);
    }
  }
}

// The activation quants of super-block b at this row: Q6_K plain Q8_K rows (d, qs, bsums),
// Q4_K / Q5_K the repacked Q8_K format (da[nb], pair sums[nb][4], qs[nb][256]).
template <int Type>
constexpr int64_t act_qs_offset(int64_t nb, int64_t b) {
  return Type == 4 ? 292 * b + 4 : 20 * nb + 256 * b;
}

// One 16-row group against N (1 or 2) tiles of 16 activation rows at act (tile t at act + 16 t
// act_row), per super-block: 4 chunks x N x (H, L) tile ops, then the epilogues.
template <int Type, int N>
inline void group_tiles(const uint8_t* group, const uint8_t* folded, int64_t nb, const uint8_t* act,
                        int64_t act_row, float* out, int64_t ldo, __mmask16 mask) {
  alignas(64) int32_t c[N][512];
  __m512 acc[N][kAmxRows];
  for (int t = 0; t < N; ++t)
    for (int j = 0; j < kAmxRows; ++j) acc[t][j] = _mm512_setzero_ps();
  const uint8_t* act1 = act + kAmxRows * act_row;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* fb = folded + kFoldedBlockBytes * b;
    const int64_t qo = act_qs_offset<Type>(nb, b);
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (N == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
    for (int p = 0; p < 4; ++p) {
      _tile_loadd(6, fb + 2048 * p, 64);
      _tile_loadd(7, fb + 2048 * p + 1024, 64);
      _tile_loadd(4, act + qo + 64 * p, act_row);
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 4, 7);
      if constexpr (N == 2) {
        _tile_loadd(5, act1 + qo + 64 * p, act_row);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
      }
    }
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[0] + 256, 64);
    if constexpr (N == 2) {
      _tile_stored(2, c[1], 64);
      _tile_stored(3, c[1] + 256, 64);
    }
    const uint8_t* blk = group + b * block_bytes(Type);
    epilogue<Type>(c[0], blk, act, act_row, nb, b, acc[0]);
    if constexpr (N == 2) epilogue<Type>(c[1], blk, act1, act_row, nb, b, acc[1]);
  }
  for (int t = 0; t < N; ++t)
    for (int j = 0; j < kAmxRows; ++j) _mm512_mask_storeu_ps(out + (t * kAmxRows + j) * ldo, mask, acc[t][j]);
}

template <int Type>
int64_t gemm(const void* packed, int64_t k, int64_t r0, int64_t r1, const void* act, int64_t n,
             float* out, int64_t ldo) {
  const int64_t n16 = n / kAmxRows * kAmxRows;
  if (n16 == 0) return 0;
  const int64_t nb = k / 256;
  const int64_t group_bytes = nb * block_bytes(Type);
  const int64_t act_row = nb * act_bytes_per_block(Type);
  const auto* w = static_cast<const uint8_t*>(packed);
  const auto* a = static_cast<const uint8_t*>(act);
  uint8_t* folded = tl_scratch.get(nb * kFoldedBlockBytes);
  if (!folded) return 0;  // no scratch: the VNNI kernel computes the same numbers
  _tile_loadconfig(&kTileConfig);
  const int64_t g0 = r0 / 16, g1 = (r1 + 15) / 16;
  // Whole tiles per chunk, at least two; an even count keeps the pairs together.
  int64_t chunk = (kChunkBytes / act_row) / (2 * kAmxRows) * (2 * kAmxRows);
  if (chunk < 2 * kAmxRows) chunk = 2 * kAmxRows;
  for (int64_t c0 = 0; c0 < n16; c0 += chunk) {
    const int64_t c1 = c0 + chunk < n16 ? c0 + chunk : n16;
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t row = g * 16;
      const int64_t valid = r1 - row < 16 ? r1 - row : 16;
      const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1u);
      const uint8_t* group = w + g * group_bytes;
      fold_group<Type>(group, nb, folded);
      int64_t j = c0;
      for (; j + 2 * kAmxRows <= c1; j += 2 * kAmxRows)
        group_tiles<Type, 2>(group, folded, nb, a + j * act_row, act_row, out + j * ldo + row, ldo, mask);
      if (j < c1) group_tiles<Type, 1>(group, folded, nb, a + j * act_row, act_row, out + j * ldo + row, ldo, mask);
    }
  }
  _tile_release();
  return n16;
}

}  // namespace

int64_t repack_gemm_amx_k(int type_code, const void* packed, int64_t k, int64_t r0, int64_t r1,
                          const void* act, int64_t n, float* out, int64_t ldo) {
  switch (type_code) {
    case 3: return gemm<3>(packed, k, r0, r1, act, n, out, ldo);
    case 4: return gemm<4>(packed, k, r0, r1, act, n, out, ldo);
    case 7: return gemm<7>(packed, k, r0, r1, act, n, out, ldo);
    default: return 0;
  }
}

}  // namespace cadenza::simd::detail
