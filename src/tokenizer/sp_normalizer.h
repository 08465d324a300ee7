// SentencePiece's text normalizer, used by Unigram vocabularies (tokenizer.ggml.model "t5"):
// the precompiled character map (tokenizer.ggml.precompiled_charsmap) and the whitespace rules.
//
// Charsmap format (SentencePiece's "precompiled_charsmap", e.g. its nmt_nfkc rules compiled):
//   uint32 little-endian T, then T bytes of a double-array trie (darts-clone layout: uint32
//   units), then the replacement strings, each NUL-terminated. The trie maps an input byte
//   sequence (usually one character, sometimes several) to the offset of its replacement.
//   A unit u: has_leaf = bit 8; value = u & 0x7FFFFFFF (a leaf unit); label = u & 0x800000FF;
//   offset = (u >> 10) << ((u & 0x200) >> 6). Searching key bytes k0 k1 ...: start at unit 0,
//   pos = offset(unit 0); for each byte, pos ^= byte, the unit there must have that label,
//   pos ^= its offset, and if it has a leaf the unit at pos holds the value of the prefix so far.
//
// Normalizing (SentencePiece's Normalizer::Normalize): repeatedly take the longest prefix of the
// input that the trie maps (else one UTF-8 character as is; an invalid byte becomes U+FFFD) and
// append its replacement. With remove_extra_whitespaces, leading spaces are dropped, runs of
// spaces become one and trailing spaces are dropped (all judged after replacement). Spaces are
// then escaped to U+2581, and with add_dummy_prefix the result starts with one.
//
// Thread-safety: immutable after build().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.h"

namespace cadenza::tok {

class SpNormalizer {
 public:
  // `charsmap` may be empty (no character mapping). Errors describe the malformed structure; all
  // lookups are bounds-checked anyway, so a wrong trie can only give wrong text, never a crash.
  static Result<SpNormalizer> build(std::vector<uint8_t> charsmap, bool remove_extra_whitespaces);

  // Appends the normalized, space-escaped form of `text` (any bytes) to `out`.
  void normalize(std::string_view text, bool add_dummy_prefix, std::string& out) const;

  // The replacement of the longest mapped prefix of `text` (non-empty) and the bytes it consumes.
  // Without a mapping: the first character itself (U+FFFD for an invalid byte), its length.
  std::pair<std::string_view, size_t> normalize_prefix(std::string_view text) const;

  bool has_charsmap() const { return !units_.empty(); }

  // Keys longer than this are not searched (SentencePiece's compiled rules map at most a few
  // characters; the bound keeps a hostile trie from costing more per position).
  static constexpr size_t kMaxKeyBytes = 256;

 private:
  std::vector<uint32_t> units_;  // the trie
  std::string replacements_;     // the NUL-terminated replacement strings
  bool remove_extra_whitespaces_ = false;
};

}  // namespace cadenza::tok
