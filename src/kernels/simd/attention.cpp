// Dispatch of the attention inner loop (attention.h).
#include "kernels/simd/attention.h"

#include <cassert>

#include "kernels/simd/isa.h"

namespace cadenza::simd {

bool attend_available(int dk, int dv) {
  return active_isa() >= Isa::avx512 && dk > 0 && dv > 0 && dk % 16 == 0 && dv % 16 == 0;
}

void attend(const float* const* q, int nq, const float* const* k_rows, const float* const* v_rows,
            int64_t n, int dk, int dv, float scale, float* const* out, float* scratch) {
  assert(attend_available(dk, dv) && nq >= 1 && nq <= kAttendMaxHeads && n >= 1);
  detail::attend_avx512(q, nq, k_rows, v_rows, n, dk, dv, scale, out, scratch);
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  assert(attend_available(16, 16));
  detail::swiglu_avx512(gate, up, out, n);
}

}  // namespace cadenza::simd
