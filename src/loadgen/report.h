// Self-contained HTML report: inline SVG charts drawn here (no scripts, fonts, or other external
// resources), so the file opens anywhere and can be archived as a CI artifact.
//
// Charts: CDFs of TTFT, TPOT and ITL (one curve per run point of every result file), and, when
// any file has several points (a sweep), output throughput against median TTFT and median TPOT
// (one curve per file). A table lists every point's summary. `bench compare` passes several
// files; each gets its own colour family.
#pragma once

#include <string>
#include <vector>

#include "loadgen/results.h"

namespace cadenza::loadgen {

std::string render_report(const std::vector<ResultFile>& files, const std::string& title);

// Writes render_report(...) to `path`. Errors: cannot write (naming the path).
Status write_report(const std::vector<ResultFile>& files, const std::string& title,
                    const std::string& path);

// Round "nice" tick values (1, 2, 5 x 10^k steps) covering [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target);

}  // namespace cadenza::loadgen
