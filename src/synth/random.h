// The deterministic random numbers of the synthesized files (synth.cpp, mmproj.cpp): splitmix64
// seeded per tensor row, so rows can be drawn in parallel and a file is the same whatever the
// thread count. Internal to src/synth.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace cadenza::synth {

// splitmix64: a tiny, high-quality generator; seeded per row so that rows can be made in
// parallel and the file is the same whatever the thread count.
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
};

inline uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// Fills `out` with N(0, std^2) using Box-Muller.
inline void fill_normal(SplitMix& rng, float std_dev, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 2) {
    double u1 = std::max(rng.uniform(), 1e-300), u2 = rng.uniform();
    double r = std::sqrt(-2.0 * std::log(u1)) * std_dev;
    out[i] = static_cast<float>(r * std::cos(2 * M_PI * u2));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(2 * M_PI * u2));
  }
}


}  // namespace cadenza::synth
