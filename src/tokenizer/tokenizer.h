// Tokenizers built from a GGUF file's tokenizer.ggml.* metadata.
//
// Supported: tokenizer.ggml.model "llama" (SentencePiece-style: score-ordered merges of adjacent
// symbols, byte fallback to <0xXX> tokens, spaces escaped to U+2581 with an optional leading
// space), "gpt2" (byte-level BPE with ranked merges after a regex pre-tokenizer selected by
// tokenizer.ggml.pre), "gemma4" (Gemma 4: SentencePiece-style text merged by ranked merges),
// "bert" (WordPiece with BERT's normalization) and "t5" (Unigram with SentencePiece's
// normalization and precompiled charsmap). Results match llama.cpp's tokenizer, which matches
// the model authors' tokenizers on their test vectors. See src/tokenizer/README.md for the
// algorithms, the pre-tokenizers and the known differences.
//
// Ownership: a Tokenizer copies what it needs; the GgufFile may be closed after from_gguf().
// Thread-safety: immutable after construction; encode/decode/... may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "util/result.h"

namespace cadenza {

class Tokenizer {
 public:
  // Errors (naming the file and key): unsupported tokenizer model ("rwkv", "plamo2", "none"...)
  // or byte-level BPE pre-tokenizer, missing or mistyped keys, token count differing from the
  // scores/types lengths, unknown token types, special-token ids outside the vocabulary,
  // duplicate token texts, merges that are malformed or name tokens not in the vocabulary,
  // add_bos/add_eos without the corresponding id, a malformed precompiled charsmap, a Unigram
  // vocabulary without an unknown token.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const gguf::GgufFile& file);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `text` (any bytes; invalid UTF-8 is tokenized losslessly through byte tokens
  // where the vocabulary has them).
  // add_special: prepend BOS / append EOS as tokenizer.ggml.add_bos_token / add_eos_token say
  //   (absent keys: BOS for "llama" and "gemma4" vocabularies and for the Llama 3 / Tekken
  //   pre-tokenizers; [CLS] ... [SEP] for "bert"; EOS only for "t5").
  // parse_special: the text of control and unknown tokens (e.g. "<|im_start|>") found in `text`
  //   becomes those tokens; otherwise it is ordinary text. User-defined tokens are always
  //   recognized (as the reference and the authors' "added tokens" do).
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Concatenated bytes of the tokens' pieces (may be invalid UTF-8, e.g. when a character's
  // bytes are split and only part is given). For SentencePiece vocabularies with a space prefix,
  // one leading space of the first token's piece is removed (the space encode() added), as the
  // reference does. render_special: control/unknown tokens render as their text (e.g. "<s>");
  // otherwise as nothing. Ids outside [0, n_vocab()) render as nothing.
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;

  // Bytes of one token, without the leading-space removal of decode(). "" for ids out of range.
  std::string token_piece(int32_t id, bool render_special = false) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 when the vocabulary has none
  int32_t eos_id() const;  // -1 when the vocabulary has none
  int32_t unk_id() const;  // -1 when the vocabulary has none
  bool add_bos() const;    // what encode(add_special = true) does
  bool add_eos() const;

  // EOS, EOT, EOM and FIM pad/repo/separator ids from the metadata, plus tokens with the texts
  // chat models use to end a turn (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, ...).
  bool is_end_of_generation(int32_t id) const;  // false out of range
  bool is_control(int32_t id) const;            // token type control; false out of range

  // The vocabulary's string for `id` as stored (byte-level BPE: stand-in characters such as
  // "Ġ" for a space). An empty string for ids out of range.
  const std::string& token_text(int32_t id) const;
  // The id whose vocabulary string is exactly `text` (the stored form, see token_text).
  std::optional<int32_t> find_token(std::string_view text) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<const Impl> impl);
  std::unique_ptr<const Impl> impl_;
};

}  // namespace cadenza

#include "tokenizer/streaming_detokenizer.h"  // IWYU pragma: export
