// When requests are sent in an open-loop run.
//
// Poisson arrivals at rate R: inter-arrival gaps are exponential with mean 1/R, drawn by inverse
// transform (-ln(1 - u) / R) from a seeded 64-bit Mersenne Twister, so a seed gives the same
// schedule on every platform. Rate infinity (or "burst") sends every request at time 0.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace cadenza::loadgen {

class ArrivalProcess {
 public:
  // rate_per_s > 0 (asserted); std::numeric_limits<double>::infinity() means all at once.
  ArrivalProcess(double rate_per_s, uint64_t seed);

  // Seconds between the previous arrival and the next (0 for an infinite rate).
  double next_gap();
  // Offsets from the start of the run of the next `n` arrivals (the first is one gap after 0).
  std::vector<double> schedule(size_t n);

  bool is_burst() const { return burst_; }
  double rate() const { return rate_; }

 private:
  double rate_;
  bool burst_;
  std::mt19937_64 rng_;
};

}  // namespace cadenza::loadgen
