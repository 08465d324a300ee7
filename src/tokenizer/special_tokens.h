// Finding the text of special tokens inside input text, before any tokenization.
//
// Candidates are the control, unknown and user-defined tokens. User-defined tokens are always
// matched (like the model authors' "added tokens", they are never split by the tokenizer); control
// and unknown tokens only when the caller asks to parse special tokens.
//
// Semantics follow the reference (llama.cpp's tokenizer_st_partition): tokens are taken in order
// of decreasing text length (then increasing id); each one claims, left to right, its
// non-overlapping occurrences in the text not yet claimed. So where two candidates overlap the
// longer wins, even if the shorter starts earlier. Tokens flagged lstrip/rstrip also swallow the
// ASCII whitespace beside them (up to the neighbouring claimed text).
//
// Implementation: one pass over the text with a byte trie finds which candidates occur at all
// (DeepSeek declares thousands of user-defined tokens; a text contains few of them). Only those
// are then searched for, in priority order, and claimed against an interval map. Memory stays
// O(candidates + claims) whatever the input; time is O(text x longest candidate) for the scan
// plus one substring search per occurring candidate.
//
// Thread-safety: immutable after construction.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace cadenza::tok {

struct Fragment {
  int32_t token;  // >= 0: a special token; -1: raw text [begin, end) to tokenize
  size_t begin, end;
};

class SpecialTokenSplitter {
 public:
  explicit SpecialTokenSplitter(const Vocab& vocab);

  // Cuts `text` into raw-text fragments and special-token fragments, in order. Whitespace
  // swallowed by lstrip/rstrip tokens belongs to no fragment. `vocab` must be the one given to
  // the constructor.
  void split(const Vocab& vocab, std::string_view text, bool parse_special,
             std::vector<Fragment>& out) const;

 private:
  // A trie of candidate texts as first-child / next-sibling lists: no per-node allocation, so
  // memory stays a small multiple of the special tokens' total text even for hostile files.
  struct Node {
    int32_t first_child = -1;
    int32_t next_sibling = -1;
    int32_t token = -1;
    int32_t priority = 0;  // claiming order of `token` (lower first)
    uint8_t byte = 0;
  };
  int32_t child(int32_t node, uint8_t byte) const;

  std::vector<Node> nodes_;
  std::array<int32_t, 256> roots_{};  // node of each first byte, -1 when none
  std::vector<int32_t> by_priority_;  // candidate token ids in claiming order
  bool any_user_defined_ = false;
};

}  // namespace cadenza::tok
