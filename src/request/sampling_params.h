// SamplingParams: what one request asks of generation: sampling (temperature, top-k, top-p,
// min-p, seed), limits and stops, logits processing, logprobs and parallel samples. Plain data.
// Read by engine::Sampler (the sampling fields) and engine::EngineCore (the rest); its rules are
// checked once, by validate_request (request/validate_request.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cadenza {

namespace grammar {
class CompiledGrammar;  // src/grammar/compiled_grammar.h (the engine links it; this layer does not)
}

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy (argmax, lowest id on ties)
  int32_t top_k = 40;        // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off; keep tokens with p >= min_p * p(top token)
  uint64_t seed = 0;         // the random stream; callers pick a random one when unset by users
  // Request-level limits and stops (read by EngineCore, not by Sampler).
  int32_t max_tokens = 256;              // >= 1: tokens to generate at most
  std::vector<int32_t> stop_token_ids{}; // generation ends on any of these (token kept in output)
  std::vector<std::string> stop{};       // ... or when the text contains one (never returned)
  bool ignore_eos = false;               // true: end-of-generation tokens do not stop
  int32_t min_tokens = 0;  // 0..max_tokens: until then EOS and stop_token_ids cannot be sampled
  // Speculative decoding (when the engine has it on): false opts this request out. Greedy output
  // is the same either way; sampled output has the same distribution (engine/speculative.h).
  bool speculative = true;

  // Logits processing (EngineCore, engine/logits_processor.h), applied to the raw logits in this
  // order before the Sampler's filters and temperature: logit_bias, repetition_penalty,
  // presence/frequency penalties, min_tokens suppression. Semantics (vLLM / OpenAI):
  std::map<int32_t, float> logit_bias{};  // token id -> finite bias added to its logit
  // Over tokens seen in the prompt or the output: positive logits are divided by it, negative
  // ones multiplied. 1: off; must be > 0 and finite. No window (all tokens count).
  float repetition_penalty = 1.0f;
  // Over generated tokens only (count = times the token was generated so far):
  //   logit -= presence_penalty * (count > 0) + frequency_penalty * count.   0: off; finite.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // -1: none. 0..20: each generated token reports its logprob and the `logprobs` most likely
  // tokens' logprobs: log-softmax of the processed logits (after bias, penalties and min_tokens
  // suppression), before temperature and the top-k / top-p / min-p filters.
  int32_t logprobs = -1;
  // Parallel samples of the prompt (1..kMaxN). Sample i (output index i) samples with seed + i.
  int32_t n = 1;
  static constexpr int32_t kMaxN = 128;
  // Constrained decoding: when set, every generated token continues a sentence of this grammar
  // (tokens that cannot are masked to -inf after the logits processing above, so logprobs see
  // the mask), end-of-generation is allowed only where the sentence is complete, and the request
  // stops (finish reason stop) as soon as the grammar admits nothing more. Compiled and cached by
  // the caller (src/grammar); shared, immutable, thread-safe.
  std::shared_ptr<const grammar::CompiledGrammar> grammar{};
  // false: control tokens (e.g. <|python_tag|>, <|channel|>) are rendered into the output text,
  // as tool-call and reasoning parsers need them; true (vLLM's default): they render as nothing.
  bool skip_special_tokens = true;
  static constexpr int32_t kMaxLogprobs = 20;
};

}  // namespace cadenza
