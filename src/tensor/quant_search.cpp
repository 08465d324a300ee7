// Chooses the K-quant scale search (quant_impl.h): the scalar reference, or its AVX2 form
// (quant_search_simd.inc), which gives the same bits faster.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "tensor/quant_impl.h"

namespace cadenza::quant_detail {
namespace {

bool cpu_has(int level) {
  if (level <= 0) return true;
  if (level > 1) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

// The best supported level; CADENZA_ISA=scalar forces the reference (other values leave it).
int initial_level() {
  int best = cpu_has(1) ? 1 : 0;
  if (const char* isa = std::getenv("CADENZA_ISA"); isa && std::strcmp(isa, "scalar") == 0) best = 0;
  return best;
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{initial_level()};
  return level;
}

}  // namespace

bool search_level_supported(int level) { return level >= 0 && cpu_has(level); }

int search_level() { return level_ref().load(std::memory_order_relaxed); }

int set_search_level(int level) {
  while (level > 0 && !search_level_supported(level)) --level;
  level = std::max(level, 0);
  level_ref().store(level, std::memory_order_relaxed);
  return level;
}

float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, uint8_t* aux,
                    float* min_out, float rmin, float rdelta, int nstep) {
  if (n <= 32 && nstep < 32) {
    switch (search_level()) {
      case 1: return avx2::fit_scale_min(n, nmax, x, w, L, aux, min_out, rmin, rdelta, nstep);
      default: break;
    }
  }
  return fit_scale_min_ref(n, nmax, x, w, L, aux, min_out, rmin, rdelta, nstep);
}

float fit_scale_symmetric(int n, int nmax, const float* x, uint8_t* L) {
  if (n <= 32) {
    switch (search_level()) {
      case 1: return avx2::fit_scale_symmetric(n, nmax, x, L);
      default: break;
    }
  }
  return fit_scale_symmetric_ref(n, nmax, x, L);
}

}  // namespace cadenza::quant_detail
