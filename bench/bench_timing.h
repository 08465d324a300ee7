// Clocks and the median for the model benchmarks (bench_model, bench_embeddings): process CPU
// seconds next to wall seconds, because these machines are shared and the CPU column is the one
// that survives other load. median() takes the upper middle of an even count.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace cadenza::bench {

inline double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace cadenza::bench
