// Vectorised inner loop of the CPU backend's paged attention (AVX-512), with run-time dispatch;
// also SwiGLU, which shares the vector exp.
//
// attend(): the heads of one GQA group of one token (nq query rows sharing one KV head) over the
// token's n positions, whose K and V rows the caller has resolved through the block table:
//   out_h = sum_p softmax_p(scale * q_h . k_p) * v_p
// as an online softmax over fixed chunks of kAttendChunk positions, in position order. Per head
// the arithmetic depends only on q_h, the K/V rows and n (not on nq, the block size, the batch or
// the thread): batch invariant for a given ISA level. Each K/V row is loaded once for all nq heads.
//
// Contracts: dk and dv multiples of 16; 1 <= nq <= kAttendMaxHeads; n >= 1; rows need no
// alignment; out rows must not alias q or K/V. scratch: attend_scratch_floats(nq, dv) floats.
// Thread-safety: pure; concurrent calls with distinct outputs and scratch are fine.
#pragma once

#include <cstdint>

namespace cadenza::simd {

inline constexpr int kAttendChunk = 32;
inline constexpr int kAttendMaxHeads = 16;

// Whether attend() runs at the active ISA level (avx512 and above) for these head sizes.
bool attend_available(int dk, int dv);
inline int64_t attend_scratch_floats(int nq, int dv) {
  return static_cast<int64_t>(nq) * (kAttendChunk + dv);
}
void attend(const float* const* q, int nq, const float* const* k_rows, const float* const* v_rows,
            int64_t n, int dk, int dv, float scale, float* const* out, float* scratch);

// out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i] with a vector exp
// (relative error ~3e-7), for i < n. Available when attend_available(16, 16) (avx512 and above).
// Elementwise, so the same per element whatever n; out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

namespace detail {
void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n);
void attend_avx512(const float* const* q, int nq, const float* const* k_rows,
                   const float* const* v_rows, int64_t n, int dk, int dv, float scale,
                   float* const* out, float* scratch);
}  // namespace detail

}  // namespace cadenza::simd
