// Code-point ranges -> UTF-8 byte-range sequences, so that a character class over code points
// becomes alternatives of byte-level terminals (each alternative 1-4 byte ranges).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cadenza::grammar {

struct CodePointRange {
  uint32_t lo, hi;  // inclusive
};

struct ByteRange {
  uint8_t lo, hi;  // inclusive
};

// Sorted, merged, surrogates (U+D800..DFFF) and values above U+10FFFF removed.
std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges);
// The complement within [0, U+10FFFF] minus surrogates; input normalized.
std::vector<CodePointRange> complement_ranges(const std::vector<CodePointRange>& ranges);
// Byte-range sequences whose union is exactly the UTF-8 encodings of the code points in the
// (normalized) ranges; disjoint, in increasing order.
std::vector<std::vector<ByteRange>> utf8_sequences(const std::vector<CodePointRange>& ranges);

// Decodes one UTF-8 code point from text at i (advancing i); false on invalid UTF-8.
bool decode_utf8(const std::string& text, size_t& i, uint32_t& cp);

}  // namespace cadenza::grammar
