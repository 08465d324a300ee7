// Speculative-decoding counters scraped from a server's Prometheus /metrics page (Cadenza's
// cadenza_spec_decode_* series, vLLM's meaning; docs/speculative.md, "Metrics"), and what one run
// point added to them.
//
// The counters are server-wide: a delta includes every client of the server during the point.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace cadenza::loadgen {

// Counter values found on one /metrics page.
struct SpecCounters {
  bool present = false;  // at least one of the series below was on the page
  double drafts = 0;     // cadenza_spec_decode_num_drafts_total
  double draft_tokens = 0;  // cadenza_spec_decode_num_draft_tokens_total
  double accepted = 0;      // cadenza_spec_decode_num_accepted_tokens_total
  // cadenza_spec_decode_num_accepted_tokens_per_pos_total{position="i"} at index i; positions
  // that were not on the page are 0.
  std::vector<double> accepted_per_pos;
};

// Reads the speculation series from Prometheus text exposition. Never fails: comments, blank
// lines, other series and lines that do not parse (no value, a non-number, a negative or
// non-finite value, a per-position series without a numeric position label below 4096) are
// skipped. Series of the same name with other labels (and the same position) are summed.
SpecCounters parse_spec_counters(std::string_view text);

// What a run point added to the counters.
struct SpecDecode {
  int64_t drafts = 0;        // verification passes of a request that had draft tokens
  int64_t draft_tokens = 0;  // draft tokens verified
  int64_t accepted = 0;      // draft tokens accepted
  std::vector<int64_t> accepted_per_pos;  // accepted at draft position i (0-based)
  double acceptance_rate = 0;             // accepted / draft_tokens
  double mean_tokens_per_verification = 0;  // 1 + accepted / drafts
  // accepted_per_pos[i] / drafts: the chance that a verification gets past position i.
  std::vector<double> acceptance_by_position;
};

// after - before. nullopt when either page had no speculation series or no draft happened in
// between (drafts or draft tokens did not grow); a counter that went down (a restarted server)
// also gives nullopt.
std::optional<SpecDecode> spec_delta(const SpecCounters& before, const SpecCounters& after);

void to_json(nlohmann::json& j, const SpecDecode& s);
void from_json(const nlohmann::json& j, SpecDecode& s);  // missing fields keep their defaults

}  // namespace cadenza::loadgen
