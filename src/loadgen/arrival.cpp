#include "loadgen/arrival.h"

#include <cassert>
#include <cmath>

namespace cadenza::loadgen {

ArrivalProcess::ArrivalProcess(double rate_per_s, uint64_t seed)
    : rate_(rate_per_s), burst_(std::isinf(rate_per_s)), rng_(seed) {
  assert(rate_per_s > 0);
}

double ArrivalProcess::next_gap() {
  if (burst_) return 0.0;
  // 53 random bits -> u in [0, 1); 1 - u in (0, 1] so the log is finite.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  return -std::log1p(-u) / rate_;
}

std::vector<double> ArrivalProcess::schedule(size_t n) {
  std::vector<double> t(n);
  double now = 0;
  for (auto& x : t) {
    now += next_gap();
    x = now;
  }
  return t;
}

}  // namespace cadenza::loadgen
