// Compute-peak probes (peak_probe.h): availability from cpu_features(), the fixed loop lengths,
// and the multi-thread driver over a ThreadPool. Baseline x86-64; the loops are in the per-ISA
// files (peak_loops.h).
#include "kernels/simd/peak_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "kernels/simd/peak_loops.h"
#include "util/thread_pool.h"

namespace cadenza::simd {
namespace {

struct PeakInfo {
  std::string_view name, description;
  int64_t macs_per_iteration;
  // Loop iterations per thread at work_scale 1: about 60 M cycles (about 25-30 ms at 2-2.5 GHz)
  // at the instruction's documented throughput on recent Xeons.
  int64_t iterations;
  void (*loop)(int64_t, int64_t*);
};

constexpr PeakInfo kInfo[kPeakCount] = {
    {"int8_vnni512", "int8 vpdpbusd zmm, 12 accumulators", detail::kPeakMacsInt8Vnni512, 10'000'000,
     detail::peak_loop_int8_vnni512},
    {"int8_maddubs512", "int8 vpmaddubsw+vpmaddwd+vpaddd zmm, 12 accumulators",
     detail::kPeakMacsInt8Maddubs512, 5'000'000, detail::peak_loop_int8_maddubs512},
    {"int8_maddubs256", "int8 vpmaddubsw+vpmaddwd+vpaddd ymm, 8 accumulators",
     detail::kPeakMacsInt8Maddubs256, 7'500'000, detail::peak_loop_int8_maddubs256},
    {"bf16_dot512", "bf16 vdpbf16ps zmm, 12 accumulators", detail::kPeakMacsBf16Dot512, 5'000'000,
     detail::peak_loop_bf16_dot512},
    {"f32_fma512", "f32 vfmadd231ps zmm, 12 accumulators", detail::kPeakMacsF32Fma512, 10'000'000,
     detail::peak_loop_f32_fma512},
    {"f32_fma256", "f32 vfmadd231ps ymm, 12 accumulators", detail::kPeakMacsF32Fma256, 10'000'000,
     detail::peak_loop_f32_fma256},
    {"amx_int8", "int8 AMX tdpbssd 16x16x64 tiles, 6 accumulator tiles", detail::kPeakMacsAmxInt8,
     625'000, detail::peak_loop_amx_int8},
};

const PeakInfo& info(Peak p) { return kInfo[static_cast<int>(p)]; }

// The avx2 / avx512 levels' requirements, as isa.cpp decided them (levels include each other).
bool avx2_ok(const CpuFeatures& f) { return f.best >= Isa::avx2; }
bool avx512_ok(const CpuFeatures& f) { return f.best >= Isa::avx512; }

}  // namespace

std::string_view peak_name(Peak p) { return info(p).name; }
std::string_view peak_description(Peak p) { return info(p).description; }
int64_t peak_macs_per_iteration(Peak p) { return info(p).macs_per_iteration; }

std::string peak_unavailable_reason(Peak p) {
  const CpuFeatures& f = cpu_features();
  switch (p) {
    case Peak::int8_maddubs256:
    case Peak::f32_fma256:
      return avx2_ok(f) ? "" : "no AVX2/FMA with OS YMM state";
    case Peak::int8_maddubs512:
    case Peak::f32_fma512:
      return avx512_ok(f) ? "" : "no AVX-512 F/BW/VL/DQ with OS ZMM state";
    case Peak::int8_vnni512:
      if (!avx512_ok(f)) return "no AVX-512 F/BW/VL/DQ with OS ZMM state";
      return f.avx512_vnni ? "" : "no AVX512_VNNI";
    case Peak::bf16_dot512:
      if (!avx512_ok(f)) return "no AVX-512 F/BW/VL/DQ with OS ZMM state";
      return f.avx512_bf16 ? "" : "no AVX512_BF16";
    case Peak::amx_int8:
      if (!(f.amx_tile && f.amx_int8)) return "no AMX-TILE/INT8 in cpuid";
      if (!f.os_amx) return "XCR0 does not enable AMX tile state";
      return f.amx_usable ? "" : "AMX listed but the tile probe failed (no permission or a fault)";
  }
  return "unknown probe";
}

PeakResult measure_peak(Peak p, ThreadPool& pool, const PeakOptions& options) {
  PeakResult r;
  r.peak = p;
  r.threads = pool.size();
  r.unavailable = peak_unavailable_reason(p);
  if (!r.unavailable.empty()) return r;
  r.available = true;
  const PeakInfo& in = info(p);
  const int64_t iterations = std::max<int64_t>(
      1, std::llround(static_cast<double>(in.iterations) * std::max(options.work_scale, 0.0)));
  r.macs = iterations * in.macs_per_iteration * r.threads;
  std::vector<int64_t> sinks(static_cast<size_t>(r.threads) * 8, 0);  // a cache line each
  std::vector<int> ran_on(static_cast<size_t>(r.threads), -1);        // index -> thread
  for (int rep = 0; rep < std::max(1, options.repetitions); ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(r.threads, [&](int64_t i, int thread) {
      in.loop(iterations, &sinks[static_cast<size_t>(i) * 8]);
      ran_on[static_cast<size_t>(i)] = thread;
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0 && (r.seconds == 0.0 || s < r.seconds)) {
      r.seconds = s;
      std::vector<int> distinct = ran_on;
      std::sort(distinct.begin(), distinct.end());
      r.threads_ran =
          static_cast<int>(std::unique(distinct.begin(), distinct.end()) - distinct.begin());
    }
  }
  r.gmac_per_s = r.seconds > 0 ? static_cast<double>(r.macs) / r.seconds / 1e9 : 0.0;
  return r;
}

std::vector<PeakResult> measure_peaks(ThreadPool& pool, const PeakOptions& options) {
  std::vector<PeakResult> all;
  for (int i = 0; i < kPeakCount; ++i) all.push_back(measure_peak(static_cast<Peak>(i), pool, options));
  return all;
}

std::optional<Peak> prefill_peak(Isa isa) {
  switch (isa) {
    case Isa::amx: return Peak::amx_int8;
    case Isa::avx512_vnni: return Peak::int8_vnni512;
    case Isa::avx512: return Peak::int8_maddubs512;
    case Isa::avx2: return Peak::int8_maddubs256;
    case Isa::scalar: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace cadenza::simd
