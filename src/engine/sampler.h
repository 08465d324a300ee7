// Token sampling for one request: greedy, temperature, top-k, top-p (nucleus) and min-p.
//
// The filters apply in the order top-k -> temperature softmax -> top-p -> min-p, as llama.cpp's
// default chain does, then one token is drawn. A Sampler owns its random state: the same seed and
// the same logits give the same tokens, whatever else runs in the process.
// Thread-safety: one Sampler per request; not shared between threads.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "request/sampling_params.h"

namespace cadenza {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks a token id from `logits` (one per vocabulary entry, raw, unnormalised).
  int32_t sample(std::span<const float> logits);

  // Speculative decoding: checks a proposer's guess `draft` (a token id, < logits.size()) against
  // the distribution p that sample() would draw from these logits. Greedy: the token is the
  // argmax, accepted when it equals `draft`. Temperature > 0 (rejection sampling with a point-mass
  // draft, Leviathan et al. 2023 with q = one-hot): `draft` is accepted with probability
  // p(draft); otherwise the token is drawn from p with `draft` removed and renormalised. Either
  // way the token is distributed exactly as sample()'s would be, so verifying drafts one position
  // after another leaves the output distribution unchanged. Uses one or two random draws (sample()
  // uses one), so a seed gives other tokens than without drafts, with the same distribution.
  struct Verdict {
    int32_t token = -1;
    bool accepted = false;  // token == draft
  };
  Verdict verify(std::span<const float> logits, int32_t draft);

  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };
  // The distribution sample() draws from, as filter() leaves it: either every token in id order
  // (all_tokens: weight exp((logit - max_logit) * inv_t), total z) or candidates_ (p in
  // candidate order, total mass).
  struct Filtered {
    bool all_tokens = false;
    float max_logit = 0.0f;
    float inv_t = 1.0f;
    double z = 0.0;
    double mass = 0.0;
  };
  // Temperature > 0 and more than one logit only.
  Filtered filter(std::span<const float> logits);
  // p(id) under `f` (0 for a token the filters dropped).
  double probability(const Filtered& f, std::span<const float> logits, int32_t id) const;
  // Draws from `f` with token `excluded` (-1: none) removed; -1 when nothing else has weight.
  int32_t draw(const Filtered& f, std::span<const float> logits, int32_t excluded);
  // A uniform double in [0, 1) from 53 random bits: reproducible across standard libraries.
  double uniform();

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> candidates_;  // scratch, reused across calls
};

// Index of the largest value; the lowest index wins ties. Empty input returns -1.
int32_t argmax(std::span<const float> values);

}  // namespace cadenza
