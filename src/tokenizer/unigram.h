// Unigram language-model tokenization (tokenizer.ggml.model "t5": T5, XLM-RoBERTa-style
// SentencePiece models), as SentencePiece's unigram model encodes: the Viterbi path through the
// lattice of every vocabulary piece found in the (normalized, space-escaped) text, scored by the
// sum of the pieces' log-probability scores.
//
// Lattice: from each character boundary, every normal or user-defined token that starts there is
// an edge (unused, control, unknown and byte tokens are not). Scores: a normal token its score; a
// user-defined one length_in_bytes * max_score - 0.1 (SentencePiece's preference for them). A
// position where no one-character token starts also gets an unknown edge over that character,
// scored min_score - 10. Ties keep the path found first: the one whose last piece starts
// earliest (longest last piece). After backtracking, runs of unknown characters are one unknown
// token, or, when the vocabulary has <0xXX> byte tokens (byte fallback), those characters' bytes.
//
// Pieces are found by extending from each boundary one character at a time while the text so
// far is a prefix of some lattice token (a set of prefix hashes), so the work per position is the
// length of the longest matching prefix, not of the longest token. Tokens longer than
// kMaxPieceBytes are left out of the lattice (real vocabularies stay far below: XLM-R's longest
// is 48 bytes), which bounds that work for hostile files.
//
// Thread-safety: immutable after build(); encode() uses only per-call state.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/flat_index.h"
#include "tokenizer/vocab.h"
#include "util/result.h"

namespace cadenza::tok {

class UnigramModel {
 public:
  // Errors: no unknown token (tokenizer.ggml.unknown_token_id, else a token of type unknown).
  static Result<UnigramModel> build(const Vocab& vocab, std::string_view file_name);

  // Appends the tokens of `text` (normalized, valid UTF-8; invalid bytes count as characters).
  void encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const;

  static constexpr float kUnknownPenalty = 10.0f;
  static constexpr size_t kMaxPieceBytes = 1024;

 private:
  bool in_lattice(const Vocab& v, int32_t id) const;

  HashSet prefixes_;  // mix64(FNV) of every character-boundary prefix of every lattice token
  float min_score_ = 0, max_score_ = 0;
  int32_t unk_ = -1;
  bool byte_fallback_ = false;
};

}  // namespace cadenza::tok
