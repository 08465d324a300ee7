// AVX-512 F/BW/VL/DQ kernels without VNNI (maddubs + madd). Compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq (and the AVX2 set). The code is kernels_x512.inc.
#include "kernels/simd/intrinsics.h"

#include <cstdint>

#include "kernels/simd/internal.h"
#include "tensor/iq_grids.h"

#define CADENZA_X512_VNNI 0

namespace cadenza::simd::detail {
namespace {
#include "kernels/simd/kernels_x512.inc"
}  // namespace

const KernelTable& avx512_table() {
  static const KernelTable t{"avx512", quantize_q8_0, quantize_q8_k, gemm_q8_0,  gemm_q4_0,
                             gemm_q4_k,   gemm_q6_k,     gemm_f16,      gemm_bf16,  gemm_q2_k,
                             gemm_q3_k,   gemm_iq4_xs,   gemm_iq4_nl,   gemm_mxfp4,
                             gemm_iq2_xxs, gemm_iq2_xs, gemm_iq2_s, gemm_iq3_xxs, gemm_iq3_s,
                             gemm_iq1_s,   gemm_iq1_m};
  return t;
}

}  // namespace cadenza::simd::detail
