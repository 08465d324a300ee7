// Byte-level BPE (tokenizer.ggml.model "gpt2"): ranked merges applied inside one pre-tokenized
// piece at a time.
//
// Algorithm: the piece starts as one symbol per byte (the token of the byte's stand-in
// character). All adjacent pairs that have a merge rule go into a min-heap keyed by (rank,
// position); the lowest-ranked pair is merged, its new neighbours are pushed, and stale heap
// entries (a side already merged away) are skipped when popped. O(n log n) per piece. Ties
// between equal ranks go to the leftmost pair, as in the reference.
//
// Because every merge rule is validated at load to name two vocabulary tokens whose
// concatenation is also a token, symbols are token ids throughout and a pair lookup is one hash
// probe on two integers.
//
// Thread-safety: immutable after build(); encode_piece() uses only caller-provided scratch.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/flat_index.h"
#include "tokenizer/vocab.h"
#include "util/result.h"

namespace cadenza::tok {

class BpeModel {
 public:
  // Validates and indexes vocab.merges. Errors name the file, the merge index and the problem.
  static Result<BpeModel> build(const Vocab& vocab, std::string_view file_name);

  // Scratch reused across pieces of one encode call (avoids per-piece allocation).
  struct Scratch {
    struct Symbol {
      int32_t token;  // -1: a byte (character) with no token
      int32_t prev, next;
      int32_t offset;  // of its first byte in the piece
    };
    struct Candidate {
      int32_t rank;
      int32_t left, right;        // symbol indices
      int32_t left_tok, right_tok;  // what they held when queued (staleness check)
      int32_t merged;
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
    std::string mapped;  // the piece in stand-in characters (for ignore_merges lookups)
  };

  // Appends the tokens of `piece` (raw bytes). Bytes without any token are emitted as the
  // unknown token when the vocabulary has one, else dropped.
  void encode_piece(std::string_view piece, const Vocab& vocab, Scratch& scratch,
                    std::vector<int32_t>& out) const;

  // SentencePiece-style BPE (tokenizer.ggml.model "gemma4"): the same ranked merges over
  // `piece` (UTF-8, spaces already escaped to U+2581) starting from one symbol per character
  // (the token whose text is that character; each byte of invalid UTF-8 is its own symbol)
  // rather than per byte. A character that is not a token is never merged and ends as its
  // bytes' <0xXX> tokens (else the unknown token; bytes with neither are dropped).
  void encode_chars(std::string_view piece, const Vocab& vocab, Scratch& scratch,
                    std::vector<int32_t>& out) const;

  size_t n_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank = 0;
    int32_t merged = 0;
  };
  void push_candidate(Scratch& s, int32_t left, int32_t right) const;
  // Applies merges to s.symbols (a linked list from index 0) until no ranked pair is left.
  void merge_all(Scratch& s) const;

  PairIndex<Merge> merges_;
};

}  // namespace cadenza::tok
