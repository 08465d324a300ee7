// Run-time ISA detection and the level the SIMD kernels dispatch to.
//
// Levels are ordered; each includes everything below it:
//   scalar       plain C++ (the reference kernels); runs anywhere
//   avx2         AVX2 + FMA + F16C, with the OS saving YMM state (XCR0 bits 1-2)
//   avx512       AVX-512 F/BW/VL/DQ, with the OS saving opmask/ZMM state (XCR0 bits 5-7)
//   avx512_vnni  + AVX512_VNNI (vpdpbusd/vpdpwssd); AVX512_BF16 is reported but not required
//   amx          + AMX-TILE/INT8/BF16, only when the OS grants tile data (XCR0 bits 17-18 and
//                arch_prctl(ARCH_REQ_XCOMP_PERM, 18) succeeds) AND a probe that configures a
//                tile and runs one tdpbssd completes in a forked child (a VM may list AMX and
//                still fault). GEMV kernels at this level are the avx512_vnni ones.
//
// The active level starts as the detected one, lowered by the environment variable
// CADENZA_ISA=scalar|avx2|avx512|avx512_vnni|amx (read once, on first use; a request above what
// the CPU has is capped; an unknown value is ignored with a warning). set_isa() changes it at run
// time (tests and benchmarks use it to cover every path).
//
// Thread-safety: detection runs once (thread-safe static). The active level is an atomic; changing
// it while other threads run kernels is allowed (each call reads the level once) but pointless.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cadenza::simd {

enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2, avx512_vnni = 3, amx = 4 };
inline constexpr int kIsaCount = 5;

// "scalar", "avx2", "avx512", "avx512_vnni", "amx".
std::string_view isa_name(Isa isa);
// Inverse of isa_name (exact, lower case); nullopt for anything else.
std::optional<Isa> isa_from_name(std::string_view name);

// What cpuid/xgetbv (and the AMX probe) found. Computed once.
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, os_ymm = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, os_zmm = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx512_fp16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false, os_amx = false;
  bool amx_usable = false;  // permission granted and the tile probe ran
  Isa best = Isa::scalar;   // highest level every requirement of which is met
  std::string why;          // one line: what was found and what capped the level
};
const CpuFeatures& cpu_features();

// Highest level this CPU and OS support.
inline Isa detected_isa() { return cpu_features().best; }

// The level kernels dispatch to now.
Isa active_isa();

// Makes `want` (capped at detected_isa()) the active level; returns the level now active.
Isa set_isa(Isa want);

// The result of interpreting a CADENZA_ISA value (nullptr = unset) against a detected level.
struct IsaChoice {
  Isa isa;
  std::string message;  // why this level: "detected ...", "capped ...", "unknown CADENZA_ISA ..."
  bool warning = false; // true when the value was unknown or above what the CPU has
};
IsaChoice choose_isa(Isa detected, const char* env_value);

// Re-reads CADENZA_ISA, applies it as at start-up, logs the choice (spdlog info, or warn for an
// unknown/capped value) and returns it.
IsaChoice init_isa_from_env();

// Human-readable summary of the detection and the active level, e.g. for `cadenza info`.
std::string isa_report();

}  // namespace cadenza::simd
