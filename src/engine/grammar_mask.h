// Applying a grammar's token bitmask to one row of logits (constrained decoding).
//
// `mask` has one bit per token id, bit (id % 32) of word id / 32, set when the grammar allows the
// token next (grammar::GrammarMatcher::fill_next_token_bitmask). Disallowed tokens get -inf; the
// allowed ones keep their logit. Shapes: logits [n_vocab], mask [ceil(n_vocab / 32)] (ids past
// the mask's end, such as padding rows of a model vocabulary larger than the tokenizer's, are
// disallowed). Returns whether some allowed token still has a finite logit (false: nothing can be
// sampled, e.g. the grammar allows only end-of-generation and min_tokens suppresses it).
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <span>

namespace cadenza::engine {

bool apply_token_bitmask(std::span<const uint32_t> mask, std::span<float> logits);

}  // namespace cadenza::engine
