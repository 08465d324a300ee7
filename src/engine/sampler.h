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
#include <string>
#include <vector>

namespace cadenza {

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
};

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
