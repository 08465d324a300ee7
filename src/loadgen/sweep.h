// Sweeps: the list of points (`--sweep-concurrency 1,2,4,8` closed loop, `--sweep-rate 1,2,inf`
// open loop) that `bench serve` runs one after another, each a full run of the workload.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace cadenza::loadgen {

struct SweepPoint {
  std::string label;        // "c=4", "rate=2", "rate=inf", "run"
  int32_t concurrency = 1;  // closed loop: workers; open loop: cap (0 = none)
  double request_rate = 0;  // 0: closed loop
};

// "inf" (or "infinity") or a positive number. Errors name the text.
Result<double> parse_rate(std::string_view text);

// Comma-separated lists. Errors: empty items, non-numbers, concurrency < 1, rate <= 0.
Result<std::vector<int32_t>> parse_concurrency_list(std::string_view text);
Result<std::vector<double>> parse_rate_list(std::string_view text);

// The points of a run. Exactly one of the lists may be non-empty (else an error); with neither,
// one point: open loop at `rate` when rate > 0 (capped by `concurrency` when > 0), else closed
// loop with `concurrency` workers. Rate sweeps use `concurrency` as the cap.
Result<std::vector<SweepPoint>> plan_points(std::string_view sweep_concurrency,
                                            std::string_view sweep_rate, double rate,
                                            int32_t concurrency);

}  // namespace cadenza::loadgen
