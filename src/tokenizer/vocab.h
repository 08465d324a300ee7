// Vocabulary: the tokenizer.ggml.* metadata of a GGUF file, validated and indexed.
//
// Everything here comes from an untrusted file. load_vocab() checks it (known model, array types
// and lengths, token types, special-token ids in range, unique token texts, well-formed byte
// tokens) and returns an Error naming the file and key otherwise; after that the tokenizer code
// can index freely.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/flat_index.h"
#include "util/result.h"

namespace cadenza::tok {

// tokenizer.ggml.token_type values (the GGUF / llama.cpp numbering).
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class VocabKind {
  kSpm,     // tokenizer.ggml.model "llama": SentencePiece-style, score-based merges
  kBpe,     // tokenizer.ggml.model "gpt2": byte-level BPE with ranked merges
  kSpmBpe,  // "gemma4": SentencePiece-style text (U+2581 for spaces, <0xXX> byte fallback)
            // merged by ranked merges over characters, cut at newline runs
  kWpm,     // "bert": WordPiece (word-initial pieces stored with a U+2581 prefix)
  kUgm,     // "t5": Unigram (Viterbi over piece scores), SentencePiece normalization
};

struct Vocab {
  VocabKind kind = VocabKind::kSpm;
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre ("default" when absent)

  std::vector<std::string> texts;  // as stored (byte-level BPE: stand-in characters)
  std::vector<float> scores;       // SPM merge priority; 0 when absent
  std::vector<TokenType> types;
  // Per-token flags of special tokens (the reference sets them for a few model families):
  // whitespace to the left / right of the token's text is dropped when it is matched in text.
  std::vector<uint8_t> lstrip, rstrip;
  std::vector<uint8_t> end_of_generation;

  TextIndex index;  // text -> id over `texts`

  int32_t bos = -1, eos = -1, unk = -1, pad = -1, eot = -1, eom = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // a space is prepended to text before tokenizing (not BPE)
  bool ignore_merges = false;     // BPE: a piece that is a vocabulary token is emitted whole

  // Token of each byte value used when text has no better token: SPM "<0xXX>" tokens (else the
  // one-character token, else unk); BPE the byte's stand-in character. -1 when none exists.
  std::array<int32_t, 256> byte_tokens{};

  // Whether normal tokens store spaces as U+2581 (every kind but byte-level BPE).
  bool escapes_spaces() const { return kind != VocabKind::kBpe; }

  // Unigram only: tokenizer.ggml.precompiled_charsmap (empty when absent) and
  // tokenizer.ggml.remove_extra_whitespaces.
  std::vector<uint8_t> charsmap;
  bool remove_extra_whitespaces = false;

  // tokenizer.ggml.merges as stored (BPE and SPM-BPE only). BpeModel::build validates and
  // indexes them; the Tokenizer then frees them.
  std::vector<std::string> merges;

  int32_t size() const { return static_cast<int32_t>(texts.size()); }
  bool valid_id(int32_t id) const { return id >= 0 && id < size(); }
  std::optional<int32_t> find(std::string_view text) const {
    const int32_t id = index.find(texts, text);
    if (id < 0) return std::nullopt;
    return id;
  }
};

Result<Vocab> load_vocab(const gguf::GgufFile& file);

// "<0xAB>" -> 0xAB; nullopt for any other text.
std::optional<uint8_t> parse_byte_token(std::string_view text);

}  // namespace cadenza::tok
