#include "engine/grammar_mask.h"

#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace cadenza::engine {

namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// One word of 32 logits under a mixed mask word (inside a JSON string most words are: the tokens
// with a quote, a backslash or a control byte are out). Returns whether a kept logit is
// sampleable: finite or +inf, i.e. x > -inf (NaN and -inf are not).
inline bool mask_word(uint32_t bits, float* x) {
#if defined(__SSE2__)
  // x86-64's baseline ISA, branch-free: 8 lanes of 4 (the compiler does not vectorize the
  // per-bit loop below by itself).
  const __m128i vbits = _mm_set1_epi32(static_cast<int>(bits));
  const __m128 masked = _mm_set1_ps(kMasked);
  __m128 any = _mm_setzero_ps();
  for (int i = 0; i < 32; i += 4) {
    const __m128i lane_bits = _mm_set_epi32(static_cast<int>(uint32_t{1} << (i + 3)), 1 << (i + 2),
                                            1 << (i + 1), 1 << i);
    const __m128 keep =
        _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_and_si128(vbits, lane_bits), lane_bits));
    const __m128 v = _mm_loadu_ps(x + i);
    any = _mm_or_ps(any, _mm_and_ps(keep, _mm_cmpgt_ps(v, masked)));
    _mm_storeu_ps(x + i, _mm_or_ps(_mm_and_ps(keep, v), _mm_andnot_ps(keep, masked)));
  }
  return _mm_movemask_ps(any) != 0;
#else
  bool any = false;
  for (int i = 0; i < 32; ++i) {
    if ((bits >> i) & 1u)
      any = any || x[i] > kMasked;
    else
      x[i] = kMasked;
  }
  return any;
#endif
}

}  // namespace

bool apply_token_bitmask(std::span<const uint32_t> mask, std::span<float> logits) {
  const size_t n = logits.size();
  float* x = logits.data();
  bool any = false;
  // Whole words first; the empty and full words (most of them outside and inside strings) as
  // fixed 32-wide loops.
  const size_t full = n / 32;
  for (size_t w = 0; w < full; ++w, x += 32) {
    const uint32_t bits = w < mask.size() ? mask[w] : 0u;
    if (bits == 0) {
      for (int i = 0; i < 32; ++i) x[i] = kMasked;
    } else if (bits == ~0u) {
      if (!any)
        for (int i = 0; i < 32; ++i) any = any || x[i] > kMasked;
    } else {
      const bool word_any = mask_word(bits, x);
      any = any || word_any;
    }
  }
  // The last, partial word.
  const size_t rest = n - full * 32;
  const uint32_t bits = rest && full < mask.size() ? mask[full] : 0u;
  for (size_t i = 0; i < rest; ++i) {
    if ((bits >> i) & 1u)
      any = any || x[i] > kMasked;
    else
      x[i] = kMasked;
  }
  return any;
}

}  // namespace cadenza::engine
