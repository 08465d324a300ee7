// ISA detection (cpuid + xgetbv + AMX probe) and the active dispatch level.
#include "kernels/simd/isa.h"

#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/simd/internal.h"

namespace cadenza::simd {
namespace {

constexpr std::string_view kNames[kIsaCount] = {"scalar", "avx2", "avx512", "avx512_vnni", "amx"};

uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool bit(uint32_t v, int b) { return (v >> b) & 1u; }

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 1 || !__get_cpuid(1, &a, &b, &c, &d)) {
    f.why = "cpuid leaf 1 unavailable";
    return f;
  }
  const bool osxsave = bit(c, 27), avx = bit(c, 28);
  f.fma = bit(c, 12);
  f.f16c = bit(c, 29);
  uint64_t xcr0 = osxsave ? read_xcr0() : 0;
  f.os_ymm = osxsave && avx && (xcr0 & 0x6) == 0x6;        // SSE + AVX state
  f.os_zmm = f.os_ymm && (xcr0 & 0xe0) == 0xe0;            // opmask, ZMM_Hi256, Hi16_ZMM
  f.os_amx = (xcr0 & (3ull << 17)) == (3ull << 17);       // XTILECFG, XTILEDATA
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned max_sub = a;
    f.avx2 = bit(b, 5);
    f.avx512f = bit(b, 16);
    f.avx512dq = bit(b, 17);
    f.avx512bw = bit(b, 30);
    f.avx512vl = bit(b, 31);
    f.avx512_vnni = bit(c, 11);
    f.amx_bf16 = bit(d, 22);
    f.avx512_fp16 = bit(d, 23);
    f.amx_tile = bit(d, 24);
    f.amx_int8 = bit(d, 25);
    if (max_sub >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      f.avx512_bf16 = bit(a, 5);
    }
  }

  // Walk up the levels; the first unmet requirement caps the level and is the reason.
  std::string cap;
  if (!(f.avx2 && f.fma && f.f16c)) {
    cap = "no AVX2/FMA/F16C";
  } else if (!f.os_ymm) {
    cap = "OS does not save YMM state";
  } else {
    f.best = Isa::avx2;
    if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)) {
      cap = "no AVX-512 F/BW/VL/DQ";
    } else if (!f.os_zmm) {
      cap = "OS does not save ZMM state";
    } else {
      f.best = Isa::avx512;
      if (!f.avx512_vnni) {
        cap = "no AVX512_VNNI";
      } else {
        f.best = Isa::avx512_vnni;
        if (!(f.amx_tile && f.amx_int8 && f.amx_bf16)) {
          cap = "no AMX-TILE/INT8/BF16 in cpuid";
        } else if (!f.os_amx) {
          cap = "XCR0 does not enable AMX tile state";
        } else {
          detail::AmxProbe p = detail::probe_amx();
          f.amx_usable = p.permitted && p.works;
          if (f.amx_usable) {
            f.best = Isa::amx;
          } else {
            cap = p.signal ? fmt::format("AMX listed but unusable: {} {}", p.detail, p.signal)
                           : fmt::format("AMX listed but unusable: {}", p.detail);
          }
        }
      }
    }
  }
  f.why = fmt::format("detected {}{}{}{}", kNames[static_cast<int>(f.best)],
                      cap.empty() ? "" : " (above it: ", cap, cap.empty() ? "" : ")");
  if (f.best >= Isa::avx512_vnni)
    f.why += fmt::format("; avx512_bf16={} avx512_fp16={}", f.avx512_bf16 ? "yes" : "no",
                         f.avx512_fp16 ? "yes" : "no");
  return f;
}

std::atomic<int> g_active{-1};

const detail::KernelTable& table_for(Isa isa) {
  switch (isa) {
    case Isa::scalar: return detail::scalar_table();
    case Isa::avx2: return detail::avx2_table();
    case Isa::avx512: return detail::avx512_table();
    case Isa::avx512_vnni:
    case Isa::amx: return detail::avx512_vnni_table();  // no AMX GEMV kernels: VNNI is faster
  }
  return detail::scalar_table();
}

// Applies CADENZA_ISA exactly once, before the first kernel call or set_isa().
void ensure_init() {
  static const bool once = [] {
    (void)init_isa_from_env();
    return true;
  }();
  (void)once;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  int i = static_cast<int>(isa);
  return i >= 0 && i < kIsaCount ? kNames[i] : std::string_view("?");
}

std::optional<Isa> isa_from_name(std::string_view name) {
  for (int i = 0; i < kIsaCount; ++i)
    if (kNames[i] == name) return static_cast<Isa>(i);
  return std::nullopt;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

IsaChoice choose_isa(Isa detected, const char* env_value) {
  if (env_value == nullptr || *env_value == '\0')
    return {detected, fmt::format("using {} (best available; CADENZA_ISA unset)", isa_name(detected))};
  std::optional<Isa> want = isa_from_name(env_value);
  if (!want)
    return {detected,
            fmt::format("unknown CADENZA_ISA='{}' (expected scalar|avx2|avx512|avx512_vnni|amx); "
                        "using {} (best available)",
                        env_value, isa_name(detected)),
            true};
  if (*want > detected)
    return {detected,
            fmt::format("CADENZA_ISA={} is not supported here; capped to {}", env_value,
                        isa_name(detected)),
            true};
  return {*want, fmt::format("using {} (forced by CADENZA_ISA)", isa_name(*want))};
}

IsaChoice init_isa_from_env() {
  const CpuFeatures& f = cpu_features();
  IsaChoice c = choose_isa(f.best, std::getenv("CADENZA_ISA"));
  g_active.store(static_cast<int>(c.isa));
  if (c.warning)
    spdlog::warn("simd: {}; {}", c.message, f.why);
  else
    spdlog::debug("simd: {}; {}", c.message, f.why);
  return c;
}

Isa active_isa() {
  ensure_init();
  return static_cast<Isa>(g_active.load(std::memory_order_relaxed));
}

Isa set_isa(Isa want) {
  ensure_init();
  Isa best = detected_isa();
  Isa got = want > best ? best : want;
  g_active.store(static_cast<int>(got));
  return got;
}

std::string isa_report() {
  return fmt::format("simd: active {}; {}", isa_name(active_isa()), cpu_features().why);
}

namespace detail {
const KernelTable& active_table() { return table_for(active_isa()); }
}  // namespace detail

}  // namespace cadenza::simd
