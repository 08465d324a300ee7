// WordPiece (tokenizer.ggml.model "bert": BERT, BGE and other BERT-style embedding models), as
// Hugging Face's BertNormalizer + BertPreTokenizer + WordPiece model define it:
//
// 1. Normalize: drop NUL, U+FFFD and characters of general category C* except tab, newline and
//    carriage return; White_Space characters become word breaks; each CJK ideograph is a word of
//    its own. For uncased vocabularies, accents are stripped (canonical decomposition without
//    Mn marks) and text lowercased.
// 2. Pre-tokenize: words are cut at whitespace, and every punctuation character (ASCII
//    punctuation and symbols, or general category P*) is a word of its own.
// 3. Each word: greedy longest-match-first. GGUF stores word-initial pieces with a U+2581 prefix
//    ("▁hello") and continuation pieces bare ("llo"; BERT's "##llo"). A word longer than 100
//    characters, or one that cannot be covered, is the unknown token as a whole.
//
// Whether the vocabulary is uncased is not in the metadata (BERT's do_lower_case and
// strip_accents live in tokenizer_config.json): it is inferred at load from the tokens, see
// WordPiece::build.
//
// Thread-safety: immutable after build(); encode() uses only per-call state.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace cadenza::tok {

class WordPiece {
 public:
  // Lowercases when no normal or user-defined token has a character with a lowercase mapping
  // (an uncased vocabulary), and then strips accents when no such token has a character that
  // accent stripping changes (BERT strips accents exactly when it lowercases, unless told
  // otherwise; a vocabulary with accented pieces was trained without stripping).
  static WordPiece build(const Vocab& vocab);

  // Appends the tokens of `text` (any bytes; invalid UTF-8 bytes are dropped like U+FFFD).
  void encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) const;

  bool lowercase() const { return lowercase_; }
  bool strip_accents() const { return strip_accents_; }

  static constexpr size_t kMaxWordChars = 100;  // BERT's max_input_chars_per_word

 private:
  void encode_word(const Vocab& vocab, std::string_view word, size_t n_chars,
                   std::vector<int32_t>& out) const;

  bool lowercase_ = false;
  bool strip_accents_ = false;
};

// BERT's CJK ideograph ranges (the CJK Unified Ideographs blocks and their extensions, and the
// compatibility ideographs).
bool is_cjk_ideograph(uint32_t cp);

}  // namespace cadenza::tok
