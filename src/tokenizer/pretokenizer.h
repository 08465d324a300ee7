// Pre-tokenizers of byte-level BPE vocabularies: the regular expressions that cut text into
// pieces ("words") before BPE merges run inside each piece. Named by tokenizer.ggml.pre.
//
// A pre-tokenizer is a sequence of regexes applied one after the other, as the model authors'
// tokenizers (Hugging Face `Split` pre-tokenizers with behaviour "isolated") do: each regex cuts
// every current piece into its matches AND the unmatched stretches between them, so no text is
// ever dropped and later regexes only see the pieces earlier ones produced (a piece's ends act
// as the subject's ends for `$`, lookarounds and \b).
//
// Regexes run on PCRE2 (UTF + UCP, so \s, \p{L}, \p{N} use Unicode properties; JIT when
// available). Input that is not valid UTF-8 is matched with PCRE2_MATCH_INVALID_UTF: invalid
// bytes never match anything and end up in unmatched stretches.
//
// Thread-safety: immutable after compile(); split() may run concurrently (per-call match data).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace cadenza::tok {

struct PreTokenizerSpec {
  std::vector<std::string_view> names;    // tokenizer.ggml.pre values that select it
  std::vector<std::string_view> regexes;  // applied in order
  bool ignore_merges = false;  // a piece that is itself a vocabulary token is emitted whole
  bool add_bos = false;        // default of tokenizer.ggml.add_bos_token for this type
};

// The spec for a tokenizer.ggml.pre value ("" means "default"); nullptr when not supported.
const PreTokenizerSpec* find_pretokenizer(std::string_view name);
// Comma-separated list of supported names, for error messages.
std::string supported_pretokenizers();

class PreTokenizer {
 public:
  // Errors name the regex that PCRE2 rejected (a bug in the table, not a file problem).
  static Result<PreTokenizer> compile(const PreTokenizerSpec& spec);

  // Appends the pieces of `text` (views into it, in order, concatenating to `text`) to `out`.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

  struct Regex;  // a compiled PCRE2 pattern (opaque: keeps pcre2.h out of this header)

 private:
  std::vector<std::shared_ptr<const Regex>> regexes_;
};

}  // namespace cadenza::tok
