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
    if (bits == 0) {  // the common case inside a constrained field: most words are empty
      for (size_t i = begin; i < end; ++i) logits[i] = kMasked;
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
