#include "util/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace cadenza {
namespace {

// Sums 64-bit words with eight independent accumulators so the loop is bound by loads, not by an
// add dependency chain; the compiler vectorises it.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t a[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) a[j] += p[i + j];
  for (; i < n; ++i) a[0] += p[i];
  uint64_t s = 0;
  for (uint64_t x : a) s += x;
  return s;
}

}  // namespace

BandwidthResult measure_read_bandwidth(size_t bytes, int threads, int repetitions) {
  threads = std::max(1, threads);
  const size_t words = bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[words]);
  // Touch every page (and give the words distinct values) so reads hit real memory.
  for (size_t i = 0; i < words; ++i) buf[i] = i;

  BandwidthResult result;
  result.bytes = words * sizeof(uint64_t);
  result.threads = threads;
  std::atomic<uint64_t> sink{0};
  for (int r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    const size_t per = words / static_cast<size_t>(threads);
    for (int t = 0; t < threads; ++t) {
      const size_t begin = per * static_cast<size_t>(t);
      const size_t count = t == threads - 1 ? words - begin : per;
      pool.emplace_back([&, begin, count] { sink += sum_words(buf.get() + begin, count); });
    }
    for (auto& th : pool) th.join();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.gb_per_s = std::max(result.gb_per_s, static_cast<double>(result.bytes) / secs / 1e9);
  }
  // Keep the sums observable so the reads cannot be optimised away.
  if (sink.load() == 0x5a5a5a5a5a5a5a5aULL) result.gb_per_s += 1e-12;
  return result;
}

}  // namespace cadenza
