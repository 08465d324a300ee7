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

  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> candidates_;  // scratch, reused across calls
};

// Index of the largest value; the lowest index wins ties. Empty input returns -1.
int32_t argmax(std::span<const float> values);

}  // namespace cadenza
