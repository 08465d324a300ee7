#include "engine/grammar_mask.h"

#include <cmath>
#include <limits>

namespace cadenza::engine {

bool apply_token_bitmask(std::span<const uint32_t> mask, std::span<float> logits) {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  bool any = false;
  for (size_t w = 0; w * 32 < n; ++w) {
    const uint32_t bits = w < mask.size() ? mask[w] : 0u;
    const size_t begin = w * 32, end = begin + 32 < n ? begin + 32 : n;
    if (bits == 0) {  // outside free text: most words are empty
      for (size_t i = begin; i < end; ++i) logits[i] = kMasked;
      continue;
    }
    if (bits == ~0u && end - begin == 32) {  // inside free text (a string): most words are full
      for (size_t i = begin; !any && i < end; ++i) any = std::isfinite(logits[i]) || logits[i] > 0;
      continue;
    }
    for (size_t i = begin; i < end; ++i) {
      if ((bits >> (i - begin)) & 1u)
        any = any || std::isfinite(logits[i]) || logits[i] > 0;  // +inf counts as sampleable
      else
        logits[i] = kMasked;
    }
  }
  return any;
}

}  // namespace cadenza::engine
