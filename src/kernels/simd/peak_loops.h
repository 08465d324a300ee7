// The single-thread loops of the compute-peak probes (peak_probe.h), one group per ISA translation
// unit: peak_avx2.cpp, peak_avx512.cpp, peak_avx512_bf16.cpp, peak_amx.cpp. Included by those files
// (which, by the rule of internal.h, see no C++ library headers) and by peak_probe.cpp.
//
// Each loop runs `iterations` iterations of its instruction on independent register accumulators
// and writes a value derived from them to *sink, so the work cannot be dropped. Callers check the
// CPU features first (peak_probe.cpp). peak_loop_amx_int8 configures the calling thread's tiles
// and releases them before it returns.
#pragma once

#include <cstdint>

namespace cadenza::simd::detail {

// Multiply-adds per loop iteration (per thread) of each loop.
inline constexpr int64_t kPeakMacsInt8Maddubs256 = 8 * 32;   // 8 chains x 32 u8*s8 products
inline constexpr int64_t kPeakMacsF32Fma256 = 12 * 8;        // 12 vfmadd231ps ymm
inline constexpr int64_t kPeakMacsInt8Vnni512 = 12 * 64;     // 12 vpdpbusd zmm
inline constexpr int64_t kPeakMacsInt8Maddubs512 = 12 * 64;  // 12 chains x 64 products
inline constexpr int64_t kPeakMacsF32Fma512 = 12 * 16;       // 12 vfmadd231ps zmm
inline constexpr int64_t kPeakMacsBf16Dot512 = 12 * 32;      // 12 vdpbf16ps zmm
inline constexpr int64_t kPeakMacsAmxInt8 = 6 * 16 * 16 * 64;  // 6 tdpbssd, 16x16x64 each

void peak_loop_int8_maddubs256(int64_t iterations, int64_t* sink);  // peak_avx2.cpp
void peak_loop_f32_fma256(int64_t iterations, int64_t* sink);       // peak_avx2.cpp
void peak_loop_int8_vnni512(int64_t iterations, int64_t* sink);     // peak_avx512.cpp
void peak_loop_int8_maddubs512(int64_t iterations, int64_t* sink);  // peak_avx512.cpp
void peak_loop_f32_fma512(int64_t iterations, int64_t* sink);       // peak_avx512.cpp
void peak_loop_bf16_dot512(int64_t iterations, int64_t* sink);      // peak_avx512_bf16.cpp
void peak_loop_amx_int8(int64_t iterations, int64_t* sink);         // peak_amx.cpp

}  // namespace cadenza::simd::detail
