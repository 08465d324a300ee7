// Internals shared by the dispatcher and the per-ISA translation units. Not for other layers.
//
// Rule for every per-ISA file (kernels_avx2.cpp, kernels_avx512*.cpp, amx_probe.cpp): it is
// compiled with -m flags the baseline CPU may lack, so it must not instantiate or call inline
// functions or templates that other files also use (C++ library templates, inline helpers from
// shared headers such as tensor/blocks.h): the linker keeps one out-of-line copy of such a function
// and could pick the one built with AVX-512 for a caller on an AVX2 machine. Everything those files
// need is in an anonymous namespace (gemm_driver.inc is included inside it).
#pragma once

#include <cstdint>

namespace cadenza::simd::detail {

// Kernel signatures (see kernels.h for the contracts). gemv is gemm with n = 1.
using QuantizeFn = void (*)(const float* x, int64_t k, void* dst);
using GemmQFn = void (*)(const void* w, int64_t rows, int64_t k, const void* act, int64_t n,
                         float* out, int64_t ldo);
using GemmFFn = void (*)(const void* w, int64_t rows, int64_t k, const float* x, int64_t n,
                         float* out, int64_t ldo);

struct KernelTable {
  const char* name;
  QuantizeFn quantize_q8_0;
  QuantizeFn quantize_q8_k;
  GemmQFn gemm_q8_0;
  GemmQFn gemm_q4_0;
  GemmQFn gemm_q4_k;
  GemmQFn gemm_q6_k;
  GemmFFn gemm_f16;
  GemmFFn gemm_bf16;
  GemmQFn gemm_q2_k;
  GemmQFn gemm_q3_k;
  GemmQFn gemm_iq4_xs;
  GemmQFn gemm_iq4_nl;
  GemmQFn gemm_mxfp4;
  GemmQFn gemm_iq2_xxs;
  GemmQFn gemm_iq2_xs;
  GemmQFn gemm_iq2_s;
  GemmQFn gemm_iq3_xxs;
  GemmQFn gemm_iq3_s;
  GemmQFn gemm_iq1_s;
  GemmQFn gemm_iq1_m;
};

// One table per level that has its own code; each lives in its own translation unit.
const KernelTable& scalar_table();       // ref.cpp
const KernelTable& avx2_table();         // kernels_avx2.cpp
const KernelTable& avx512_table();       // kernels_avx512.cpp
const KernelTable& avx512_vnni_table();  // kernels_avx512_vnni.cpp

// The table of the active level (isa.cpp).
const KernelTable& active_table();

// repack_vnni.cpp: the repacked GEMM (repack.h) at avx512_vnni; type_code 0 = Q8_0, 1 = Q4_0,
// 2 = Q5_0, 3 = Q4_K, 4 = Q6_K, 5 = IQ4_NL, 6 = MXFP4, 7 = Q5_K (repack.cpp's type_code).
void repack_gemm_vnni(int type_code, const void* packed, int64_t k, int64_t r0, int64_t r1,
                      const void* act, int64_t n, float* out, int64_t ldo);

// repack_amx.cpp: the repacked GEMM at amx (every type code): computes activation rows [0, n16),
// n16 = n rounded down to a multiple of 16, and returns n16 (0 when n < 16 or no scratch memory;
// the caller runs the rest on VNNI). Equal bit for bit to repack_gemm_vnni on those rows.
int64_t repack_gemm_amx(int type_code, const void* packed, int64_t k, int64_t r0, int64_t r1,
                        const void* act, int64_t n, float* out, int64_t ldo);
// repack_amx_k.cpp: the same contract for the K-quants with the sub-block scales folded into the
// tiles (type codes 3 Q4_K, 4 Q6_K, 7 Q5_K); repack_gemm_amx forwards those it routes there.
int64_t repack_gemm_amx_k(int type_code, const void* packed, int64_t k, int64_t r0, int64_t r1,
                          const void* act, int64_t n, float* out, int64_t ldo);

// amx_probe.cpp: requests tile permission and runs one tile instruction in a forked child.
struct AmxProbe {
  bool permitted = false;  // arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) succeeded
  bool works = false;      // the child ran ldtilecfg + tdpbssd and exited normally
  int signal = 0;          // the signal that killed the child, if one did
  const char* detail = "";
};
AmxProbe probe_amx();

}  // namespace cadenza::simd::detail
