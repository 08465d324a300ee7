// Shared helpers of the grammar tests: a small synthetic vocabulary, a JSON grammar, the shared
// Qwen2 vocabulary, and the brute-force mask the matcher's masks are checked against.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_index.h"
#include "shared_data.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::grammar::test {

// Ids 0..255: the single bytes. Then multi-byte pieces (JSON fragments, UTF-8 characters whole
// and split, an empty token), then specials: <|tool|> (id kTool), <|eot|> (eog, kEot),
// <|other|> (kOther).
inline constexpr int32_t kFirstPiece = 256;
inline const std::vector<std::string>& synthetic_pieces() {
  static const std::vector<std::string> pieces = {
      "true", "false", "null", "{\"", "\":", "\",", "\"}", "ab", "abc", "aa", "aaa", " ", "  ",
      "\n", "12", "1.5", "\xC3\xA9", "\xE6\x97\xA5\xE6\x9C\xAC", "\xE6\x97", "\xA5", "a\"",
      "\"\"", "[]", "{}", "},", "],", "\\u00", "\\n", "", "x\xC3", "\xA9y", "{\"a\": 1}", "ba",
      "\xF0\x9F\x98\x80", "\xF0\x9F", "\x98\x80"};
  return pieces;
}
inline int32_t synthetic_special_base() {
  return kFirstPiece + static_cast<int32_t>(synthetic_pieces().size());
}

inline std::shared_ptr<const TokenIndex> synthetic_index() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  for (const auto& p : synthetic_pieces()) bytes.push_back(p);
  std::vector<uint8_t> special(bytes.size(), 0);
  std::vector<std::string> text(bytes.size());
  for (const char* s : {"<|tool|>", "<|eot|>", "<|other|>"}) {
    bytes.emplace_back();
    special.push_back(1);
    text.emplace_back(s);
  }
  const int32_t base = synthetic_special_base();
  return TokenIndex::build(std::move(bytes), std::move(special), {base + 1}, std::move(text));
}

// Generic JSON (written for these tests; whitespace kept short so that walks stay interesting).
inline const char* json_gbnf() {
  return R"(# JSON values
root   ::= ws value ws
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n]{0,3}
)";
}

inline std::shared_ptr<const CompiledGrammar> compile_or_die(
    const std::string& gbnf, std::shared_ptr<const TokenIndex> index) {
  auto g = compile_gbnf(gbnf, std::move(index));
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error()) << "\n" << gbnf;
  return g.ok() ? *g : nullptr;
}

// The Qwen2 vocabulary of ../shared/models/tiny-qwen2-f16.gguf; nullptr when absent.
inline std::shared_ptr<const TokenIndex> qwen2_index() {
  static std::shared_ptr<const TokenIndex> index = [] {
    std::shared_ptr<const TokenIndex> out;
    const auto dir = cadenza::test::shared_dir();
    if (dir.empty()) return out;
    auto file = gguf::GgufFile::open((dir / "models" / "tiny-qwen2-f16.gguf").string());
    if (!file) return out;
    auto tok = Tokenizer::from_gguf(**file);
    if (!tok) return out;
    return TokenIndex::from_tokenizer(**tok);
  }();
  return index;
}

// The mask by definition, one token at a time: a normal token is allowed iff its bytes are
// accepted as text or accept_token takes it (token terminals, eog); each probe is undone by
// rollback, so the matcher ends where it started.
inline std::vector<uint32_t> brute_force_mask(GrammarMatcher& m) {
  const TokenIndex& index = m.grammar().index();
  std::vector<uint32_t> words(index.mask_words(), 0);
  for (int32_t id = 0; id < index.n_vocab(); ++id) {
    bool ok = false;
    const std::string_view bytes = index.token_bytes(id);
    if (!index.is_special(id) && !index.is_eog(id) && !bytes.empty() && m.accept_bytes(bytes)) {
      m.rollback(1);
      ok = true;
    }
    if (!ok && m.accept_token(id)) {
      m.rollback(1);
      ok = true;
    }
    if (ok) words[id / 32] |= 1u << (id % 32);
  }
  return words;
}

inline std::vector<int32_t> allowed_ids(const std::vector<uint32_t>& words, int32_t n_vocab) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n_vocab; ++id) {
    if ((words[id / 32] >> (id % 32)) & 1) ids.push_back(id);
  }
  return ids;
}

}  // namespace cadenza::grammar::test
