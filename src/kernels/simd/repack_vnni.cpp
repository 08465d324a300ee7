// AVX-512 VNNI GEMM over repacked Q8_0/Q4_0/Q5_0/IQ4_NL/MXFP4/Q4_K/Q5_K/Q6_K weights (layout and math in
// repack.h).
// Compiled with the avx512 flags plus -mavx512vnni; everything in an anonymous namespace (see
// internal.h for why).
//
// Micro-kernel: one 16-row group x N (1..8) activation rows. Per block: 8 weight vectors of
// 64 bytes (16 rows x 4 codes), each multiplied by 4 broadcast activation bytes of every
// activation row with vpdpbusd into per-activation int32 accumulators; then per activation:
// subtract offset * sum(a), convert, and one fma with dw[16] * da. The integer part is exact, so
// the float sequence per (row, activation) is the same for every N: batch invariant.
//
// Blocking for prefill: activations in chunks of at most ~192 KiB (L2), and within a chunk every
// group of the row range against every tile of 8 activations; a group's weights (16 x k codes)
// stay in L1/L2 across the tiles.
#include "kernels/simd/intrinsics.h"

#include <cstdint>

#include "kernels/simd/internal.h"
#include "tensor/iq_grids.h"

namespace cadenza::simd::detail {
namespace {

constexpr int kMaxTile = 8;

#include "kernels/simd/repack_blocks.inc"

constexpr int tile_for(int type) { return is_k_type(type) ? 4 : kMaxTile; }

// One group (16 rows) x N activations; acts[j] points at activation row j (da, corr, qs arrays).
template <int Type, int N>
inline void group_tile(const uint8_t* group, int64_t nb, const uint8_t* const* acts, float* out,
                       int64_t ldo, __mmask16 store_mask) {
  __m512 acc[N];
  for (int j = 0; j < N; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * block_bytes(Type);
    __m512i wv[8];
    weight_vectors<Type>(blk, wv);
    const __m512 dw = block_scales<Type>(blk);
    if constexpr (N == 1) {
      // One activation: two integer chains for latency; integer sums are exact, so this equals
      // the single-chain result bit for bit.
      const uint8_t* qs = acts[0] + 8 * nb + 32 * b;
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      for (int s = 0; s < 8; s += 2) {
        s0 = _mm512_dpbusd_epi32(s0, wv[s], _mm512_set1_epi32(ld32(qs + 4 * s)));
        s1 = _mm512_dpbusd_epi32(s1, wv[s + 1], _mm512_set1_epi32(ld32(qs + 4 * s + 4)));
      }
      float da;
      __builtin_memcpy(&da, acts[0] + 4 * b, 4);
      const __m512i isum = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(ld32(acts[0] + 4 * nb + 4 * b)));
      acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(da)), acc[0]);
    } else {
      __m512i isum[N];
      for (int j = 0; j < N; ++j) isum[j] = _mm512_set1_epi32(-ld32(acts[j] + 4 * nb + 4 * b));
      for (int s = 0; s < 8; ++s) {
        for (int j = 0; j < N; ++j) {
          const uint8_t* qs = acts[j] + 8 * nb + 32 * b;
          isum[j] = _mm512_dpbusd_epi32(isum[j], wv[s], _mm512_set1_epi32(ld32(qs + 4 * s)));
        }
      }
      for (int j = 0; j < N; ++j) {
        float da;
        __builtin_memcpy(&da, acts[j] + 4 * b, 4);
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(dw, _mm512_set1_ps(da)), acc[j]);
      }
    }
  }
  for (int j = 0; j < N; ++j) _mm512_mask_storeu_ps(out + j * ldo, store_mask, acc[j]);
}

// ---- Q4_K / Q5_K (Q5): one group x N (1..4) activations, per super-block (layout in repack.h) ----
// Q5_K's fifth bits are added to the nibbles under their 64-bit masks (vpaddb under mask).
template <int N, bool Q5>
inline void q4_k_tile(const uint8_t* group, int64_t nb, const uint8_t* const* acts, float* out,
                      int64_t ldo, __mmask16 store_mask) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), bit4 = _mm512_set1_epi8(0x10);
  __m512 acc[N];
  for (int j = 0; j < N; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * (Q5 ? 2880 : 2368);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
    __m512i sumq[N], summ[N];
    for (int j = 0; j < N; ++j) sumq[j] = summ[j] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      const __m512i sc_lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 64 + 32 * p)));
      const __m512i sc_hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 80 + 32 * p)));
      const __m512i mnv = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 192 + 32 * p)));
      __m512i ia[N], ib[N];
      for (int j = 0; j < N; ++j) ia[j] = ib[j] = _mm512_setzero_si512();
      const uint8_t* nib = blk + 320 + 512 * p;
      for (int t = 0; t < 8; ++t) {
        const __m512i v = _mm512_loadu_si512(nib + 64 * t);
        __m512i lo = _mm512_and_si512(v, m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if constexpr (Q5) {
          uint64_t h0, h1;
          __builtin_memcpy(&h0, blk + 2368 + 128 * p + 16 * t, 8);
          __builtin_memcpy(&h1, blk + 2368 + 128 * p + 16 * t + 8, 8);
          lo = _mm512_mask_add_epi8(lo, _cvtu64_mask64(h0), lo, bit4);
          hi = _mm512_mask_add_epi8(hi, _cvtu64_mask64(h1), hi, bit4);
        }
        for (int j = 0; j < N; ++j) {
          const uint8_t* qs = acts[j] + 20 * nb + 256 * b + 64 * p + 4 * t;
          ia[j] = _mm512_dpbusd_epi32(ia[j], lo, _mm512_set1_epi32(ld32(qs)));
          ib[j] = _mm512_dpbusd_epi32(ib[j], hi, _mm512_set1_epi32(ld32(qs + 32)));
        }
      }
      for (int j = 0; j < N; ++j) {
        sumq[j] = _mm512_add_epi32(sumq[j], _mm512_add_epi32(_mm512_mullo_epi32(ia[j], sc_lo),
                                                             _mm512_mullo_epi32(ib[j], sc_hi)));
        summ[j] = _mm512_dpwssd_epi32(summ[j], mnv, _mm512_set1_epi32(ld32(acts[j] + 4 * nb + 16 * b + 4 * p)));
      }
    }
    for (int j = 0; j < N; ++j) {
      float da;
      __builtin_memcpy(&da, acts[j] + 4 * b, 4);
      const __m512 vda = _mm512_set1_ps(da);
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumq[j]), _mm512_mul_ps(d, vda), acc[j]);
      acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ[j]), _mm512_mul_ps(dmin, vda), acc[j]);
    }
  }
  for (int j = 0; j < N; ++j) _mm512_mask_storeu_ps(out + j * ldo, store_mask, acc[j]);
}

// ---- Q6_K: one group x N (1..4) activations (plain Q8_K rows), per super-block ----
// Sub-blocks of 16: for quarter p, nibble vectors t < 4 hold sub-blocks 4p (low) / 4p+2 (high),
// t >= 4 sub-blocks 4p+1 / 4p+3; the two high bits come from the hi2 plane (layout in repack.h).
template <int N>
inline void q6_k_tile(const uint8_t* group, int64_t nb, const uint8_t* const* acts, float* out,
                      int64_t ldo, __mmask16 store_mask) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m03 = _mm512_set1_epi8(0x03), m0c = _mm512_set1_epi8(0x0c);
  __m512 acc[N];
  for (int j = 0; j < N; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * 3360;
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    __m512i sumq[N], summ[N];
    for (int j = 0; j < N; ++j) sumq[j] = summ[j] = _mm512_setzero_si512();
    for (int m = 0; m < 8; ++m) {
      const __m512i pv = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32 + 32 * m)));
      for (int j = 0; j < N; ++j)
        summ[j] = _mm512_dpwssd_epi32(summ[j], pv, _mm512_set1_epi32(ld32(acts[j] + 292 * b + 260 + 4 * m)));
    }
    for (int p = 0; p < 4; ++p) {
      const __m512i pa = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32 + 64 * p)));
      const __m512i pb = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 + 64 * p)));
      // Scales of sub-blocks 4p, 4p+1 (pa) and 4p+2, 4p+3 (pb) as int32 lanes.
      const __m512i sc[4] = {_mm512_srai_epi32(_mm512_slli_epi32(pa, 16), 16), _mm512_srai_epi32(pa, 16),
                             _mm512_srai_epi32(_mm512_slli_epi32(pb, 16), 16), _mm512_srai_epi32(pb, 16)};
      for (int half = 0; half < 2; ++half) {  // t in [4 half, 4 half + 4): sub-blocks 4p+half, 4p+2+half
        __m512i ia[N], ib[N];
        for (int j = 0; j < N; ++j) ia[j] = ib[j] = _mm512_setzero_si512();
        for (int t4 = 0; t4 < 4; ++t4) {
          const int t = 4 * half + t4;
          const __m512i v = _mm512_loadu_si512(blk + 288 + 512 * p + 64 * t);
          __m512i h = _mm512_loadu_si512(blk + 2336 + 256 * p + 64 * t4);
          if (half) h = _mm512_srli_epi16(h, 4);
          const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_slli_epi16(_mm512_and_si512(h, m03), 4));
          const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                             _mm512_slli_epi16(_mm512_and_si512(h, m0c), 2));
          for (int j = 0; j < N; ++j) {
            const uint8_t* qs = acts[j] + 292 * b + 4 + 64 * p + 4 * t;
            ia[j] = _mm512_dpbusd_epi32(ia[j], lo, _mm512_set1_epi32(ld32(qs)));
            ib[j] = _mm512_dpbusd_epi32(ib[j], hi, _mm512_set1_epi32(ld32(qs + 32)));
          }
        }
        for (int j = 0; j < N; ++j)
          sumq[j] = _mm512_add_epi32(sumq[j], _mm512_add_epi32(_mm512_mullo_epi32(ia[j], sc[half]),
                                                               _mm512_mullo_epi32(ib[j], sc[2 + half])));
      }
    }
    for (int j = 0; j < N; ++j) {
      float da;
      __builtin_memcpy(&da, acts[j] + 292 * b, 4);
      const __m512i isum = _mm512_sub_epi32(sumq[j], _mm512_slli_epi32(summ[j], 5));
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(da)), acc[j]);
    }
  }
  for (int j = 0; j < N; ++j) _mm512_mask_storeu_ps(out + j * ldo, store_mask, acc[j]);
}

template <int Type>
void run_tile(int count, const uint8_t* group, int64_t nb, const uint8_t* const* acts, float* out,
              int64_t ldo, __mmask16 mask) {
  if constexpr (Type == 4) {
    switch (count) {
      case 4: q6_k_tile<4>(group, nb, acts, out, ldo, mask); break;
      case 3: q6_k_tile<3>(group, nb, acts, out, ldo, mask); break;
      case 2: q6_k_tile<2>(group, nb, acts, out, ldo, mask); break;
      case 1: q6_k_tile<1>(group, nb, acts, out, ldo, mask); break;
      default: break;
    }
    return;
  }
  if constexpr (Type == 3 || Type == 7) {
    constexpr bool q5 = Type == 7;
    switch (count) {
      case 4: q4_k_tile<4, q5>(group, nb, acts, out, ldo, mask); break;
      case 3: q4_k_tile<3, q5>(group, nb, acts, out, ldo, mask); break;
      case 2: q4_k_tile<2, q5>(group, nb, acts, out, ldo, mask); break;
      case 1: q4_k_tile<1, q5>(group, nb, acts, out, ldo, mask); break;
      default: break;
    }
    return;
  }
  switch (count) {
    case 8: group_tile<Type, 8>(group, nb, acts, out, ldo, mask); break;
    case 7: group_tile<Type, 7>(group, nb, acts, out, ldo, mask); break;
    case 6: group_tile<Type, 6>(group, nb, acts, out, ldo, mask); break;
    case 5: group_tile<Type, 5>(group, nb, acts, out, ldo, mask); break;
    case 4: group_tile<Type, 4>(group, nb, acts, out, ldo, mask); break;
    case 3: group_tile<Type, 3>(group, nb, acts, out, ldo, mask); break;
    case 2: group_tile<Type, 2>(group, nb, acts, out, ldo, mask); break;
    case 1: group_tile<Type, 1>(group, nb, acts, out, ldo, mask); break;
    default: break;
  }
}

template <int Type>
void gemm(const void* packed, int64_t k, int64_t r0, int64_t r1, const void* act, int64_t n,
          float* out, int64_t ldo) {
  constexpr int kTile = tile_for(Type);
  const int64_t nb = k / block_elems(Type);
  const int64_t group_bytes = nb * block_bytes(Type);
  const int64_t act_row = nb * act_bytes_per_block(Type);
  const auto* w = static_cast<const uint8_t*>(packed);
  const auto* a = static_cast<const uint8_t*>(act);
  const int64_t g0 = r0 / 16, g1 = (r1 + 15) / 16;
  // Activation chunk: a multiple of the tile, about 192 KiB.
  int64_t chunk = (192 * 1024 / act_row) / kMaxTile * kMaxTile;
  if (chunk < kMaxTile) chunk = kMaxTile;
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t c1 = c0 + chunk < n ? c0 + chunk : n;
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t row = g * 16;
      const int64_t valid = r1 - row < 16 ? r1 - row : 16;
      const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1u);
      for (int64_t j = c0; j < c1; j += kTile) {
        const int count = static_cast<int>(c1 - j < kTile ? c1 - j : kTile);
        const uint8_t* acts[kMaxTile];
        for (int t = 0; t < count; ++t) acts[t] = a + (j + t) * act_row;
        run_tile<Type>(count, w + g * group_bytes, nb, acts, out + j * ldo + row, ldo, mask);
      }
    }
  }
}

}  // namespace

void repack_gemm_vnni(int type_code, const void* packed, int64_t k, int64_t r0, int64_t r1,
                      const void* act, int64_t n, float* out, int64_t ldo) {
  switch (type_code) {
    case 0: gemm<0>(packed, k, r0, r1, act, n, out, ldo); break;
    case 1: gemm<1>(packed, k, r0, r1, act, n, out, ldo); break;
    case 2: gemm<2>(packed, k, r0, r1, act, n, out, ldo); break;
    case 3: gemm<3>(packed, k, r0, r1, act, n, out, ldo); break;
    case 4: gemm<4>(packed, k, r0, r1, act, n, out, ldo); break;
    case 5: gemm<5>(packed, k, r0, r1, act, n, out, ldo); break;
    case 6: gemm<6>(packed, k, r0, r1, act, n, out, ldo); break;
    case 7: gemm<7>(packed, k, r0, r1, act, n, out, ldo); break;
    default: break;
  }
}

}  // namespace cadenza::simd::detail
