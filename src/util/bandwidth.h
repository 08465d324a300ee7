// A memory read-bandwidth probe: the yardstick for decode speed, which streams every weight once
// per token. `cadenza bench` reports decode GB/s as a percentage of this figure.
#pragma once

#include <cstddef>

namespace cadenza {

struct BandwidthResult {
  double gb_per_s = 0;  // best of the repetitions, 1 GB = 1e9 bytes
  size_t bytes = 0;     // buffer size read per repetition
  int threads = 0;
};

// Reads a `bytes`-sized buffer (much larger than the caches) with `threads` threads, each summing
// its own contiguous share, `repetitions` times; returns the best rate.
BandwidthResult measure_read_bandwidth(size_t bytes, int threads, int repetitions = 5);

}  // namespace cadenza
