// SentencePiece-style tokenization (tokenizer.ggml.model "llama"), as llama.cpp's SPM tokenizer
// does it: there is no pre-tokenizer and no merge list. The text (spaces already escaped to
// U+2581) starts as one symbol per UTF-8 character; every adjacent pair whose concatenation is a
// vocabulary token is a candidate with that token's score; the highest score (leftmost on ties)
// is merged first, repeatedly, through a max-heap with lazy invalidation (O(n log n)). Symbols
// left that are not tokens fall back to byte tokens <0xXX>. Bytes of invalid UTF-8 are symbols
// of their own, so any input round-trips through byte tokens.
//
// Thread-safety: stateless; all state is per call.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace cadenza::tok {

// Appends the tokens of `text` (already space-escaped, any bytes) to `out`.
void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

// " " -> U+2581 (the SentencePiece whitespace marker); other whitespace is kept.
void spm_escape_spaces(std::string_view text, std::string& out);

}  // namespace cadenza::tok
