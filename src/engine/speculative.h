// Speculative decoding options of an engine (EngineConfig::speculative) and their checks.
//
// What the engine does with them (speculative.cpp, src/engine/README.md "Speculative decoding"):
// before each step, every eligible running request in its decode phase asks the proposer for up
// to k draft tokens (k = num_speculative_tokens, or less with `adaptive`); they are computed in
// the same ragged forward pass as everything else (1 + k positions for that request, logits for
// each); each draft is verified in order (Sampler::verify: by comparison with the argmax for
// greedy requests, by exact rejection sampling for sampled ones), the first rejected one is
// replaced by the target's token (or, all accepted, a bonus token is sampled), so 1..k+1 tokens
// per step, and the rejected positions are rolled back in the KV cache.
//
// Eligible: every request with SamplingParams::speculative (the default), greedy or sampled, and
// each sample of an n > 1 request once forked. Greedy output is token for token the plain output;
// sampled output has the plain output's distribution (a seed gives other tokens than without
// speculation). Logit bias, penalties and min_tokens are allowed: each position's logits are
// processed with the request's state after the tokens before it were accepted, exactly as plain
// decoding would.
//
// Proposers: n-gram prompt lookup (method ngram), or a draft model (method draft, draft_model).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/result.h"

namespace cadenza::engine {

enum class SpeculativeMethod : uint8_t {
  kNone,   // plain decoding
  kNgram,  // prompt lookup (spec::NgramProposer)
  kDraft,  // a draft model with the target's vocabulary (spec::DraftModelProposer)
};

// "none" / "ngram" / "draft".
const char* to_string(SpeculativeMethod method);
// The method named `name` ("none", "ngram", "draft"); an error that lists the valid names
// otherwise.
Result<SpeculativeMethod> parse_speculative_method(std::string_view name);

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  int32_t num_speculative_tokens = 4;  // most drafts per request and step, 1..spec::kMaxSpeculativeTokens
  int32_t ngram_min = 1;               // 1..ngram_max (method ngram)
  int32_t ngram_max = 4;               // ngram_min..spec::kMaxNgram (method ngram)
  // true: each request's k per step (0..num_speculative_tokens) comes from its measured
  // acceptance and the measured step cost (draft_length_policy.h), so speculation stops where it
  // does not pay (compute-bound steps: large batches, tiny models). false: always the most k.
  bool adaptive = true;
  // Method draft: the draft model's GGUF file (required then, and only then). EngineCore::create
  // loads it on the target's backend with a KV pool of the engine's block count and checks its
  // vocabulary (spec/draft_model_proposer.h).
  std::string draft_model = {};
  bool enabled() const { return method != SpeculativeMethod::kNone; }
};

// Ok for method none with no draft_model, whatever the other fields; otherwise the first bad
// field and its range, as "speculative: ..." (a start-up error for the CLI options): a draft_model
// with a method other than draft, method draft without one. Whether the file loads is checked by
// EngineCore::create.
Status validate(const SpeculativeConfig& config);

}  // namespace cadenza::engine
