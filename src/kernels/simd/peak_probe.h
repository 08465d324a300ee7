// Compute-peak probes: the multiply-add rate this CPU reaches with each instruction family the
// kernels use, on every thread of a thread pool at once. `cadenza bench` prints prefill against the
// int8 peak of the path the kernels take at the active ISA level (prefill_peak), as it prints
// decode against the read-bandwidth probe (util/bandwidth.h).
//
// Each probe is a short loop of one instruction on independent accumulators held in registers
// (no loads, no stores in the loop: an upper bound no kernel exceeds), run the same fixed number of
// times on every pool thread at once; the rate is all threads' multiply-adds over the wall time of
// the loop, best of a few repetitions. Units: multiply-adds (MAC) per second, never ops (1 MAC = 2
// ops). MACs per instruction: vpdpbusd zmm 64 (16 int32 lanes x 4 u8*s8 products), vpmaddubsw +
// vpmaddwd + vpaddd 64 (zmm) / 32 (ymm), vdpbf16ps zmm 32, vfmadd*ps zmm 16 / ymm 8, tdpbssd on
// 16x16x64 tiles 16384.
//
// Every probe checks the CPU features first (cpu_features()); one this CPU or OS lacks reports
// "not available" with the reason and runs nothing (no SIGILL). The AMX probe needs the tile
// permission that cpu_features() requests (amx_probe.cpp) and configures tiles on each thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/simd/isa.h"

namespace cadenza {
class ThreadPool;
}

namespace cadenza::simd {

enum class Peak : int {
  int8_vnni512 = 0,     // vpdpbusd zmm (AVX512_VNNI): the int8 path at avx512_vnni
  int8_maddubs512 = 1,  // vpmaddubsw + vpmaddwd + vpaddd zmm: the int8 path at avx512
  int8_maddubs256 = 2,  // the same in ymm: the int8 path at avx2
  bf16_dot512 = 3,      // vdpbf16ps zmm (AVX512_BF16)
  f32_fma512 = 4,       // vfmadd231ps zmm
  f32_fma256 = 5,       // vfmadd231ps ymm
  amx_int8 = 6,         // tdpbssd on 16x16x64 tiles (AMX-INT8): the int8 path at amx
};
inline constexpr int kPeakCount = 7;

// "int8_vnni512", ...: the JSON key.
std::string_view peak_name(Peak p);
// One line: the instruction, width and accumulators, e.g. "int8 vpdpbusd zmm, 12 accumulators".
std::string_view peak_description(Peak p);
// Multiply-adds one loop iteration of the probe performs (per thread).
int64_t peak_macs_per_iteration(Peak p);

// Empty when the probe can run here; otherwise why not ("no AVX512_VNNI", ...).
std::string peak_unavailable_reason(Peak p);

struct PeakOptions {
  int repetitions = 3;       // the best is kept
  double work_scale = 1.0;   // scales the fixed loop length (about 30 ms at 1.0); tests use less
};

struct PeakResult {
  Peak peak = Peak::f32_fma256;
  bool available = false;
  std::string unavailable;   // the reason when !available
  int threads = 0;           // pool threads asked to run it at once (pool.size())
  // Distinct threads that ran the best repetition: below `threads` when a worker joined too late
  // (a loaded machine) and the caller ran its share too, as the kernels would.
  int threads_ran = 0;
  int64_t macs = 0;          // multiply-adds of one repetition, all threads
  double seconds = 0.0;      // wall time of the best repetition
  double gmac_per_s = 0.0;   // macs / seconds / 1e9 of the best repetition; 0 when unavailable
};

// Runs probe `p` on every thread of `pool` at once: pool.parallel_for over pool.size() indices,
// one fixed loop each (the equal per-thread shares the matmul kernels use).
PeakResult measure_peak(Peak p, ThreadPool& pool, const PeakOptions& options = {});
// Every probe, in enum order (unavailable ones included, not run).
std::vector<PeakResult> measure_peaks(ThreadPool& pool, const PeakOptions& options = {});

// The int8 peak of the path the quantized matmul kernels take at `isa`: amx -> amx_int8,
// avx512_vnni -> int8_vnni512, avx512 -> int8_maddubs512, avx2 -> int8_maddubs256; scalar: none.
std::optional<Peak> prefill_peak(Isa isa);

}  // namespace cadenza::simd
