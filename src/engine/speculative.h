// Speculative decoding options of an engine (EngineConfig::speculative) and their checks.
//
// What the engine does with them (speculative.cpp, src/engine/README.md "Speculative decoding"):
// before each step, every eligible running request in its decode phase asks the proposer for up
// to num_speculative_tokens draft tokens; they are computed in the same ragged forward pass as
// everything else (1 + k positions for that request, logits for each), the longest prefix that
// equals what the request would have sampled is accepted, the target's next token is appended
// after it (so 1..k+1 tokens per step), and the rejected positions are rolled back in the KV cache.
//
// Eligible (exact by comparison): temperature <= 0 (greedy), n == 1, SamplingParams::speculative.
// Logit bias, penalties and min_tokens are allowed: each position's logits are processed with the
// request's state after the tokens before it were accepted, exactly as plain decoding would.
// Temperature > 0 (needs rejection sampling) and n > 1 do not speculate (yet).
#pragma once

#include <cstdint>
#include <string_view>

#include "util/result.h"

namespace cadenza::engine {

enum class SpeculativeMethod : uint8_t {
  kNone,   // plain decoding
  kNgram,  // prompt lookup (spec::NgramProposer)
};

// "none" / "ngram".
const char* to_string(SpeculativeMethod method);
// The method named `name` ("none", "ngram"); an error that lists the valid names otherwise.
Result<SpeculativeMethod> parse_speculative_method(std::string_view name);

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  int32_t num_speculative_tokens = 4;  // most drafts per request and step, 1..spec::kMaxSpeculativeTokens
  int32_t ngram_min = 1;               // 1..ngram_max
  int32_t ngram_max = 4;               // ngram_min..spec::kMaxNgram
  // true: each request's k per step (0..num_speculative_tokens) comes from its measured
  // acceptance and the measured step cost (draft_length_policy.h), so speculation stops where it
  // does not pay (compute-bound steps: large batches, tiny models). false: always the most k.
  bool adaptive = true;
  bool enabled() const { return method != SpeculativeMethod::kNone; }
};

// Ok for method none whatever the other fields; otherwise the first bad field and its range, as
// "speculative: ..." (a start-up error for the CLI options).
Status validate(const SpeculativeConfig& config);

}  // namespace cadenza::engine
