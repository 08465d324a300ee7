#include "tokenizer/wordpiece.h"

#include <string>

#include "tokenizer/unicode_bytes.h"
#include "tokenizer/unicode_tables.h"

namespace cadenza::tok {

namespace {

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581 before word-initial pieces

bool is_bert_punctuation(uint32_t cp) {
  // ASCII punctuation includes the symbols $ + < = > ^ ` | ~ (Rust's is_ascii_punctuation).
  if (cp < 0x80) {
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) ||
           (cp >= 0x5B && cp <= 0x60) || (cp >= 0x7B && cp <= 0x7E);
  }
  return is_punctuation_category(cp);
}

bool usable(const Vocab& v, int32_t id) {
  const TokenType t = v.types[id];
  return t == TokenType::kNormal || t == TokenType::kUserDefined;
}

// Decodes every code point of `s` (invalid bytes as U+FFFD) and calls f(cp).
template <typename F>
void for_each_code_point(std::string_view s, F&& f) {
  size_t off = 0;
  while (off < s.size()) {
    uint32_t cp = 0;
    size_t len = 0;
    if (!decode_utf8(s.substr(off), cp, len)) cp = 0xFFFD;
    f(cp);
    off += len;
  }
}

}  // namespace

bool is_cjk_ideograph(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

WordPiece WordPiece::build(const Vocab& vocab) {
  bool has_upper = false, has_accented = false;
  std::string mapped;
  for (int32_t id = 0; id < vocab.size() && !(has_upper && has_accented); ++id) {
    if (!usable(vocab, id)) continue;
    std::string_view text = vocab.texts[id];
    if (text.substr(0, kWordStart.size()) == kWordStart) text.remove_prefix(kWordStart.size());
    for_each_code_point(text, [&](uint32_t cp) {
      mapped.clear();
      append_lowercase(cp, mapped);
      uint32_t first = 0;
      size_t len = 0;
      if (!decode_utf8(mapped, first, len) || first != cp || len != mapped.size()) {
        has_upper = true;
      }
      mapped.clear();
      append_stripped_accents(cp, mapped);
      if (!decode_utf8(mapped, first, len) || first != cp || len != mapped.size()) {
        has_accented = true;
      }
    });
  }
  WordPiece wp;
  wp.lowercase_ = !has_upper;
  wp.strip_accents_ = wp.lowercase_ && !has_accented;
  return wp;
}

void WordPiece::encode(const Vocab& vocab, std::string_view text,
                       std::vector<int32_t>& out) const {
  std::string word, stripped, lowered;
  size_t n_chars = 0;
  auto end_word = [&] {
    if (!word.empty()) encode_word(vocab, word, n_chars, out);
    word.clear();
    n_chars = 0;
  };
  auto add_char = [&](uint32_t cp) {
    if (is_bert_punctuation(cp)) {
      end_word();
      append_utf8(word, cp);
      n_chars = 1;
      end_word();
      return;
    }
    append_utf8(word, cp);
    ++n_chars;
  };
  for_each_code_point(text, [&](uint32_t cp) {
    // Cleaning: tab, newline and carriage return are whitespace, not controls.
    const bool space = cp == '\t' || cp == '\n' || cp == '\r' || is_white_space(cp);
    if (!space && (cp == 0 || cp == 0xFFFD || is_other_category(cp))) return;
    if (space) {
      end_word();
      return;
    }
    if (is_cjk_ideograph(cp)) {
      end_word();
      // Stripping and lowercasing leave ideographs ideographs (compatibility ideographs become
      // unified ones).
      stripped.clear();
      if (strip_accents_) {
        append_stripped_accents(cp, stripped);
      } else {
        append_utf8(stripped, cp);
      }
      word = stripped;
      n_chars = 1;
      end_word();
      return;
    }
    if (!lowercase_) {
      add_char(cp);
      return;
    }
    stripped.clear();
    if (strip_accents_) {
      append_stripped_accents(cp, stripped);
    } else {
      append_utf8(stripped, cp);
    }
    lowered.clear();
    for_each_code_point(stripped, [&](uint32_t c) { append_lowercase(c, lowered); });
    for_each_code_point(lowered, add_char);
  });
  end_word();
}

void WordPiece::encode_word(const Vocab& vocab, std::string_view word, size_t n_chars,
                            std::vector<int32_t>& out) const {
  const size_t mark = out.size();
  bool unknown = n_chars > kMaxWordChars;
  std::string key;
  for (size_t start = 0; start < word.size() && !unknown;) {
    int32_t found = -1;
    size_t end = word.size();
    while (end > start) {
      key.clear();
      if (start == 0) key = kWordStart;
      key.append(word.substr(start, end - start));
      if (auto id = vocab.find(key); id && usable(vocab, *id)) {
        found = *id;
        break;
      }
      // Back off one character.
      do {
        --end;
      } while (end > start && (static_cast<uint8_t>(word[end]) & 0xC0) == 0x80);
    }
    if (found < 0) {
      unknown = true;
      break;
    }
    out.push_back(found);
    start = end;
  }
  if (unknown) {
    out.resize(mark);
    if (vocab.unk >= 0) out.push_back(vocab.unk);
  }
}

}  // namespace cadenza::tok
