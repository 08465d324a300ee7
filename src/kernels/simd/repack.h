// Repacked ("interleaved") weights for Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4, Q4_K, Q5_K and Q6_K, and the AVX-512
// VNNI GEMM/GEMV that runs on them (prefill and decode share one kernel).
// At the amx level, whole tiles of 16 activation rows run on AMX tiles instead (repack_amx.cpp;
// the K-quants with their sub-block scales folded into the tiles, repack_amx_k.cpp) and the
// remaining rows on the VNNI kernel; both give the same results bit for bit.
//
// Why: the row-major kernels (kernels.h) reduce each dot product horizontally and spend a sign
// trick, a conversion and two float ops per 32-element block and activation. Here 16 weight rows
// are interleaved so that one vpdpbusd computes 4 products for each of 16 rows at once against 4
// broadcast activation bytes; a block's float work (convert, scale, fma) then covers 16 rows, and
// every loaded weight vector is reused for up to 8 activations held in registers.
//
// Layout (per matrix): rows padded with zero rows to a multiple of kRepackRows = 16, cut into
// groups of 16 rows; group g holds its k/32 blocks in order, each block:
//   fp16 d[16]                                   (the 16 rows' scales, 32 bytes)
//   Q8_0: u8 q[8][16][4]   q[s][r][i] = w[r][4s+i] + 128                      (512 bytes)
//   Q4_0, Q5_0: u8 n[4][16][4], low nibble = q[r][4t+i], high nibble = q[r][16+4t+i] (256 bytes)
//   Q5_0 only: u64 h[8], bit 4r+i of h[s] = fifth bit of q[r][4s+i]                 (64 bytes)
//   IQ4_NL: as Q4_0, n[] holding the 4-bit table codes                         (32 + 256 bytes)
//   MXFP4: u8 e[16] (the rows' E8M0 scale bytes) instead of d[16], then n[] of the 4-bit E2M1
//          codes                                                               (16 + 256 bytes)
// where q is the unsigned code (Q4_0: 0..15, offset 8; Q5_0: 0..31, offset 16; Q8_0: w + 128,
// offset 128; IQ4_NL/MXFP4: the kernel maps the stored code c through the format's value table
// to q = value(c) + 128, offset 128), so a block's integer dot product is
// sum(q * a) - offset * sum(a). MXFP4's block scale is 2^(e - 128) (tensor/blocks.h), exact.
// The repacked matrix has exactly the bytes of the original rows (padding rows aside).
// Q4_K, per 16-row group and 256-element super-block (2368 bytes; the rows' 16 x 144 = 2304):
//   fp16 d[16], fp16 dmin[16], u8 sc[8][16], u8 mn[4][16][2] (mn[p][r][e] = min of sub-block
//   2p+e), u8 n[4][8][16][4]: n[p][t][r][i] low nibble = q[r][64p+4t+i] (sub-block 2p), high
//   nibble = q[r][64p+32+4t+i] (sub-block 2p+1).
// Q5_K, per 16-row group and super-block (2880 bytes; the rows' 16 x 176 = 2816): Q4_K's 2368
//   bytes for the scales, mins and the low 4 bits, then u64 h[4][8][2]: bit 4r+i of h[p][t][e] =
//   the fifth bit of q[r][64p+32e+4t+i] (q = 0..31).
// Q6_K, per 16-row group and super-block (3360 bytes = 16 x 210): fp16 d[16], int8
//   sc[8][16][2] (sc[m][r][e] = scale of sub-block 2m+e), u8 n[4][8][16][4] (low nibble = low 4
//   bits of q[r][64p+4t+i], high nibble = those of q[r][64p+32+4t+i]), u8 h[4][4][16][4]: bits
//   0-1 / 2-3 = top 2 bits of q[r][64p+4t+i] / q[r][64p+32+4t+i], bits 4-7 the same for t+4;
//   q = 0..63 (offset 32).
//
// Activations: 32-element types: each row quantized to Q8_0 exactly as quantize_q8_0 does (so
// results match the row-major kernels' rounding of activations), stored as float da[k/32], int32
// corr[k/32] (= offset * sum of the block's quants), int8 qs[k]. Q4_K: quantized to Q8_K as
// quantize_q8_k does, stored as float da[k/256], int32 bs[k/256][4] (bs[b][p] = the sums of the
// quants of sub-blocks 2p and 2p+1 as two int16, low and high), int8 qs[k]; Q5_K the same. Q6_K:
// plain Q8_K rows (quantize_q8_k).
//
// Result, per weight row r and activation row j (the same at every n, row range and thread count,
// and equal bit for bit to ref::repack_gemm, which works from the original GGUF rows):
//   32-element types: acc = 0; for each block b: acc = fma(float(sumi_b), dw_b * da_b, acc)
//   with sumi_b the exact integer dot product of block b;
//   Q4_K, Q5_K: acc = 0; for each super-block b: acc = fma(float(sumq_b), d_b * da_b, acc);
//   acc = fma(-float(summ_b), dmin_b * da_b, acc) with sumq_b = sum_j sc_j * (q . a over
//   sub-block j) and summ_b = sum_j mn_j * (sum of a over sub-block j), both exact integers;
//   Q6_K: acc = fma(float(sumi_b), d_b * da_b, acc), sumi_b = sum_j sc_j * ((q - 32) . a over
//   sub-block j of 16), exact.
//
// Contracts: k a multiple of 32 (256 for the K-quants: see repack_fits); rows >= 1; pointers need no alignment; `packed` comes from
// repack_weights with the same (type, rows, k); [r0, r1) with r0 a multiple of 16, r1 <= rows;
// out[j * ldo + r] for r in [r0, r1), j in [0, n) (ldo >= rows when n > 1) is all that is
// written. Thread-safety: pure functions; distinct row ranges may run concurrently.
#pragma once

#include <cstdint>

#include "kernels/simd/isa.h"
#include "tensor/dtype.h"

namespace cadenza::simd {

inline constexpr int64_t kRepackRows = 16;

// Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4, Q4_K, Q5_K, Q6_K.
bool repack_supported(DType type);
// Whether rows of k elements of this type can be repacked (k a multiple of the block size).
bool repack_fits(DType type, int64_t k);
// Whether the repacked kernel runs at `isa` (avx512_vnni and above) for this type.
bool repack_usable(DType type, Isa isa);
// Bytes of one repacked matrix of `rows` rows of k elements (rows padded to a multiple of 16).
int64_t repack_bytes(DType type, int64_t rows, int64_t k);
// Writes the repacked form of `rows` GGUF rows (row r at src + r * row_bytes(type, k)) to dst
// (repack_bytes(type, rows, k) bytes).
void repack_weights(DType type, const void* src, int64_t rows, int64_t k, void* dst);

// Activation rows for the repacked kernels.
int64_t repack_act_row_bytes(DType type, int64_t k);
void repack_quantize_act(DType type, const float* x, int64_t k, void* dst);

// out rows [r0, r1) for n activation rows (act: n rows of repack_act_row_bytes(k) bytes).
// Requires repack_usable(type, active_isa()).
void repack_gemm(DType type, const void* packed, int64_t rows, int64_t k, int64_t r0, int64_t r1,
                 const void* act, int64_t n, float* out, int64_t ldo);

namespace ref {
// The scalar reference, from the ORIGINAL (GGUF) rows [0, rows): out[j * ldo + r]. Bit-identical
// to repack_gemm (same integer sums, the same fma chain).
void repack_gemm(DType type, const void* weights, int64_t rows, int64_t k, const void* act,
                 int64_t n, float* out, int64_t ldo);
}  // namespace ref

}  // namespace cadenza::simd
