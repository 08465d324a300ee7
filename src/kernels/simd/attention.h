// Paged-attention inner loop of the CPU backend (one token's GQA group over its K/V rows), with a
// scalar reference and an AVX-512 path chosen at run time; also SwiGLU, which shares the vector
// exp.
//
// attend(): the heads of one GQA group of one token (nq query rows sharing one KV head) over the
// token's n positions, whose K and V rows the caller has resolved through the block table:
//   out_h = sum_p softmax_p(scale * q_h . k_p) * v_p
// as an online softmax over fixed chunks of kAttendChunk positions, in position order. With
// `sinks` (nq logits, or null) head h's sink joins the denominator only, after the last chunk:
// with m = max(running max, sink_h) and c = exp(running max - m),
//   out_h = acc_h * (c / (running_sum_h * c + exp(sink_h - m)))      (std::exp, both paths)
// and without sinks out_h = acc_h * (1 / running_sum_h) as before.
//
// K/V element types (`type`; the row of one head of one token, n elements):
//   F32   n floats
//   F16   n IEEE binary16 values
//   Q8_0  n/32 blocks of tensor/blocks.h BlockQ8_0 (f16 scale d + 32 int8 q; value = d * q)
// Every element decodes exactly to f32 (an f16 is an f32; d * q has at most 19 significant bits),
// and both paths decode each chunk's rows to f32 before using them. So for a given path the
// result for F16/Q8_0 rows is bit for bit the result for their decoded F32 rows: the element type
// changes the stored values, never the arithmetic.
//
// Flash-decoding (attend_partial + attend_combine): a long sequence's positions are cut into
// fixed splits of kAttendSplit positions (counted from its first position, independent of the
// thread count, the block size and the batch); each split runs the loop above on its own and
// leaves its unnormalised state (running max m_s, running sum l_s, accumulator a_s), and
// attend_combine merges the splits in split order:
//   m = max_s m_s;  c_s = exp(m_s - m) (std::exp);  l = sum_s l_s c_s;  a = sum_s a_s c_s
//   out = a * attend_final_scale(m, l, sinks, h)
// (sums in split order, starting from 0). The caller (kernels/cpu/attention.cpp) uses this for
// every sequence longer than one split and plain attend() otherwise, so a sequence's result is a
// function of its values and length only, whatever computes the splits in parallel.
//
// Batch invariance: per head the arithmetic depends only on q_h, the K/V rows and n (not on nq,
// the block size, the batch or the thread), for a given path (attend_ref or the vector path of the
// active ISA level).
//
// Contracts: 1 <= nq <= kAttendMaxHeads; n >= 1; dk, dv >= 1 (Q8_0: multiples of 32); rows need
// no alignment; out rows must not alias q or K/V. scratch: attend_scratch_floats(nq, dk, dv)
// floats. Thread-safety: pure; concurrent calls with distinct outputs and scratch are fine.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace cadenza::simd {

inline constexpr int kAttendChunk = 32;
inline constexpr int kAttendMaxHeads = 16;
// Positions per flash-decoding split (a multiple of kAttendChunk): fixed, so that results do not
// depend on how many threads share a sequence. Sized so that a split's work (256 positions) dwarfs
// its combine (one rescale of dv floats per head) and a 1k-token decode already has 4 splits per
// KV head to share among threads.
inline constexpr int kAttendSplit = 256;
static_assert(kAttendSplit % kAttendChunk == 0);

// Blocked prefill attention (attend_tile): a tile of query tokens of one sequence that share one
// split's K/V rows; each K/V chunk is decoded (and K transposed) once for the whole tile and
// reused by every (token, head) row of it. At most this many tokens per tile.
inline constexpr int kAttendTileTokens = 16;

// Whether the vector attend() runs at the active ISA level (avx512 and above) for these head
// sizes (multiples of 16).
bool attend_available(int dk, int dv);
// Whether attend()/attend_ref() accept K/V rows of `type` with these head sizes: F32 and F16
// always (dk, dv >= 1), Q8_0 when dk and dv are multiples of 32.
bool attend_type_supported(DType type, int dk, int dv);
inline int64_t attend_scratch_floats(int nq, int dk, int dv) {
  return static_cast<int64_t>(nq) * (kAttendChunk + dv) +
         static_cast<int64_t>(kAttendChunk) * (dk + dv);
}

// The vector path (requires attend_available(dk, dv) and attend_type_supported(type, dk, dv)).
void attend(const float* const* q, int nq, const void* const* k_rows, const void* const* v_rows,
            DType type, int64_t n, int dk, int dv, float scale, const float* sinks,
            float* const* out, float* scratch);
// The scalar reference (any level): scores by dot products of 8 interleaved partial sums
// (element i to sum i % 8, combined pairwise), std::exp, values accumulated element by element.
void attend_ref(const float* const* q, int nq, const void* const* k_rows,
                const void* const* v_rows, DType type, int64_t n, int dk, int dv, float scale,
                const float* sinks, float* const* out, float* scratch);
// The partial forms (flash-decoding splits): the same loop as attend / attend_ref over the given
// rows, with the same arithmetic, but instead of normalising, out[h] receives the accumulator
// a_h (dv floats), part_max[h] the running max and part_sum[h] the running sum; sinks are left to
// attend_combine. Same contracts as attend / attend_ref.
void attend_partial(const float* const* q, int nq, const void* const* k_rows,
                    const void* const* v_rows, DType type, int64_t n, int dk, int dv, float scale,
                    float* const* out, float* part_max, float* part_sum, float* scratch);
void attend_partial_ref(const float* const* q, int nq, const void* const* k_rows,
                        const void* const* v_rows, DType type, int64_t n, int dk, int dv,
                        float scale, float* const* out, float* part_max, float* part_sum,
                        float* scratch);
// Merges n_parts >= 1 partial states of head h (part s: accumulator acc + s * stride, max
// max[s * stride], sum sum[s * stride]) in part order as above, writing dv floats to out (which
// must not alias the parts). Scalar; shared by both paths. Pure.
void attend_combine(const float* acc, const float* max, const float* sum, int64_t stride,
                    int64_t n_parts, int dv, const float* sinks, int h, float* out);
// The factor of head h's accumulator at the end (shared by both paths): 1 / running_sum without
// a sink, else as above.
float attend_final_scale(float running_max, float running_sum, const float* sinks, int h);

// out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i] with a vector exp
// (relative error ~3e-7), for i < n. Available when attend_available(16, 16) (avx512 and above).
// Elementwise, so the same per element whatever n; out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

// A tile for attend_tile / attend_tile_ref: nt tokens (1 <= nt <= kAttendTileTokens), each with
// the same nq heads (1 <= nq <= kAttendMaxHeads) of one GQA group, over the first n[t] of the
// rows k_rows[0 ..), v_rows[0 ..) (1 <= n[t]; the arrays hold max_t n[t] rows). Rows are
// token-major: q[t * nq + h], out[t * nq + h]. Token t is in the partial form (attend_partial:
// out gets the accumulator, part_max[t][h] / part_sum[t][h] the state) when part_max[t] is
// non-null, else in the final form (attend, with `sinks`: nq logits or null). Same type and shape
// contracts as attend / attend_ref.
struct AttendTile {
  const float* const* q = nullptr;
  int nq = 0;
  int nt = 0;
  const int64_t* n = nullptr;
  const void* const* k_rows = nullptr;
  const void* const* v_rows = nullptr;
  DType type = DType::F32;
  int dk = 0, dv = 0;
  float scale = 1.0f;
  const float* sinks = nullptr;
  float* const* out = nullptr;
  float* const* part_max = nullptr;  // [nt], entries null for final-form tokens
  float* const* part_sum = nullptr;  // [nt]
};
inline int64_t attend_tile_scratch_floats(int nt, int nq, int dk, int dv) {
  return static_cast<int64_t>(nt) * nq * (kAttendChunk + dv) +
         static_cast<int64_t>(kAttendChunk) * (2 * dk + dv);
}
// Every row of the tile gets exactly the bits that attend / attend_partial (the vector path;
// requires attend_available) or attend_ref / attend_partial_ref (the reference, any level) give
// it alone over its n[t] rows: blocking over tokens never changes a row's order of operations.
// The vector path computes a chunk's scores from K transposed to [dk][32] (16 positions per
// vector) with the lane chains and the summation tree of attend's sum16, so the scores are the
// same floats without the per-row transposing reduction. scratch: attend_tile_scratch_floats.
// Pure; concurrent calls with distinct outputs and scratch are fine.
void attend_tile(const AttendTile& tile, float* scratch);
void attend_tile_ref(const AttendTile& tile, float* scratch);

namespace detail {
void attend_tile_avx512(const AttendTile& tile, float* scratch);
void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n);
void attend_avx512(const float* const* q, int nq, const void* const* k_rows,
                   const void* const* v_rows, DType type, int64_t n, int dk, int dv, float scale,
                   const float* sinks, float* const* out, float* scratch, float* part_max = nullptr,
                   float* part_sum = nullptr);
}  // namespace detail

}  // namespace cadenza::simd
