// LogitsProcessor: the per-request logits transformations that run before the Sampler (logit
// bias, repetition / presence / frequency penalties, min_tokens), and the logprobs of a step.
//
// Order, on a copy of the raw logits of one step (the model's output is never modified):
//   1. logit_bias:          logit[id] += bias
//   2. repetition_penalty:  for ids seen in the prompt or output: logit > 0 ? logit / rp : logit * rp
//   3. presence/frequency:  logit[id] -= presence * (count > 0) + frequency * count
//                           (count: times id was generated so far; the prompt does not count)
//   4. min_tokens:          while fewer than min_tokens tokens were generated, EOS and
//                           stop_token_ids get -inf
// Logprobs (when SamplingParams::logprobs >= 0) are the log-softmax of the result, before the
// Sampler's temperature and filters; suppressed ids have -inf.
//
// The state (seen ids, output counts) depends only on the request's own tokens, so processing is
// the same alone, batched or after a preemption (output tokens are never resampled).
// Thread-safety: one per request, engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sampler.h"

namespace cadenza::engine {

struct TopLogprob {
  int32_t token = -1;
  float logprob = 0;
};

// The logprob entry of one generated token.
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;            // the chosen token's
  int32_t rank = 0;             // 1 + how many ids have a strictly larger logprob
  std::vector<TopLogprob> top;  // the `logprobs` most likely ids, descending (lowest id first on ties)
};

class LogitsProcessor {
 public:
  // `eog_ids`: the tokenizer's end-of-generation ids (suppressed by min_tokens unless ignore_eos).
  // Params must be valid for a vocabulary of n_vocab (EngineCore::add_request checks).
  LogitsProcessor(const SamplingParams& params, std::span<const int32_t> prompt,
                  std::span<const int32_t> eog_ids, int32_t n_vocab);

  // Whether apply() changes anything or logprobs are wanted; false: sample the raw logits.
  bool active() const { return active_; }

  // Steps 1-4 in place on `logits` ([n_vocab]), given the tokens generated so far.
  void apply(std::span<float> logits, int32_t num_output_tokens) const;

  // Records a generated token (counts and seen ids).
  void accept(int32_t token);

 private:
  SamplingParams params_;
  int32_t n_vocab_ = 0;
  bool active_ = false;
  bool penalize_seen_ = false;     // repetition_penalty != 1
  bool penalize_counts_ = false;   // presence or frequency != 0
  std::vector<uint8_t> seen_mask_;  // [n_vocab] when penalize_seen_
  std::vector<int32_t> seen_ids_;   // ids with seen_mask_ set
  std::unordered_map<int32_t, int32_t> counts_;  // generated id -> count
  std::vector<int32_t> suppressed_;              // ids min_tokens suppresses
};

// The logprob entry of `token` over `logits` (log-softmax), with the `num_top` best ids.
// `scratch` is reused between calls. Preconditions: logits non-empty, 0 <= token < logits.size().
TokenLogprob compute_logprobs(std::span<const float> logits, int32_t token, int32_t num_top,
                              std::vector<int32_t>& scratch);

}  // namespace cadenza::engine
