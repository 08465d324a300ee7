// A recursive-descent parser of the regex subset (regex_to_gbnf.h) that emits GBNF as it goes:
// each parse function returns one Piece (GBNF text plus what kind of text it is, so that
// quantifiers know when to add parentheses and adjacent literals can merge).
#include "grammar/regex_to_gbnf.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace cadenza {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // sorted, disjoint, inclusive

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [a, b] : r) {
    if (!out.empty() && a <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.emplace_back(a, b);
    }
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [a, b] : r) {
    if (a > next) out.emplace_back(next, a - 1);
    next = b + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

Ranges subtract(const Ranges& a, const Ranges& b) {
  // a \ b = a ∩ complement(b)
  const Ranges cb = complement(normalize(b));
  Ranges out;
  for (const auto& [x0, x1] : a)
    for (const auto& [y0, y1] : cb) {
      const uint32_t lo = std::max(x0, y0), hi = std::min(x1, y1);
      if (lo <= hi) out.emplace_back(lo, hi);
    }
  return normalize(out);
}

bool contains(const Ranges& r, uint32_t c) {
  for (const auto& [a, b] : r)
    if (a <= c && c <= b) return true;
  return false;
}

std::string utf8(uint32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

// One character inside a GBNF class: ASCII punctuation that is special there, and controls, as
// \xHH; other ASCII as itself; everything else as its UTF-8 bytes.
std::string class_char(uint32_t c) {
  if (c < 0x20 || c == 0x7F || c == '\\' || c == ']' || c == '[' || c == '-' || c == '^' ||
      c == '"')
    return fmt::format("\\x{:02x}", c);
  return utf8(c);
}

std::string class_text(const Ranges& r, bool negated) {
  std::string s = negated ? "[^" : "[";
  for (const auto& [a, b] : r) {
    s += class_char(a);
    if (b != a) {
      if (b != a + 1) s += '-';
      s += class_char(b);
    }
  }
  return s + "]";
}

// A class for a non-empty set, negated when that is shorter (sets that reach the top code point).
std::string set_text(const Ranges& r) {
  if (!r.empty() && r.back().second == kMaxCodePoint) {
    const Ranges c = complement(r);
    if (!c.empty()) return class_text(c, true);
  }
  return class_text(r, false);
}

const Ranges& digit_set() {
  static const Ranges r = {{'0', '9'}};
  return r;
}
const Ranges& word_set() {
  static const Ranges r = normalize({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
  return r;
}
const Ranges& space_set() {  // JavaScript's \s
  static const Ranges r = normalize({{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680},
                                     {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
                                     {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}});
  return r;
}
const Ranges& dot_set() {
  static const Ranges r = complement(normalize({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
  return r;
}

enum class Kind { kEmpty, kLiteral, kPrimary, kSequence, kAlternation };

struct Piece {
  Kind kind = Kind::kEmpty;
  std::string text;   // GBNF
  std::string bytes;  // kLiteral: the bytes the literal stands for
};

Piece literal_piece(std::string bytes) {
  Piece p;
  p.kind = Kind::kLiteral;
  p.text = gbnf_literal(bytes);
  p.bytes = std::move(bytes);
  return p;
}

// A code point as written in a JSON string body.
std::string json_escaped(uint32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (c < 0x20) return fmt::format("\\u{:04x}", c);
  return utf8(c);
}

class Parser {
 public:
  Parser(std::string_view re, RegexTarget target, int max_rep)
      : re_(re), target_(target), max_rep_(max_rep) {}

  Result<RegexExpression> run() {
    RegexExpression out;
    if (!re_.empty() && re_[0] == '^') {
      out.anchored_start = true;
      pos_ = 1;
    }
    end_ = re_.size();
    if (end_ > pos_ && re_[end_ - 1] == '$' && !escaped_at(end_ - 1)) {
      out.anchored_end = true;
      --end_;
    }
    Piece p = alternation();
    if (!error_.message.empty()) return error_;
    if (pos_ < end_) {
      if (re_[pos_] == ')') return fail(pos_, "unbalanced ')'");
      return fail(pos_, "unexpected character");
    }
    out.expr = p.text;
    return out;
  }

 private:
  // Whether the character at i is preceded by an odd number of backslashes.
  bool escaped_at(size_t i) const {
    size_t n = 0;
    while (i > n && re_[i - n - 1] == '\\') ++n;
    return n % 2 == 1;
  }

  Error fail(size_t at, std::string_view what) {
    if (error_.message.empty()) error_ = make_error("offset {}: {}", at, what);
    return error_;
  }
  bool failed() const { return !error_.message.empty(); }
  bool at_end() const { return pos_ >= end_; }
  char peek() const { return re_[pos_]; }

  Piece alternation() {
    std::vector<Piece> branches;
    bool has_empty = false;
    for (;;) {
      Piece s = sequence();
      if (failed()) return {};
      if (s.kind == Kind::kEmpty) {
        has_empty = true;
      } else {
        branches.push_back(std::move(s));
      }
      if (at_end() || peek() != '|') break;
      ++pos_;
    }
    if (branches.empty()) return {};
    Piece p;
    if (branches.size() == 1 && !has_empty) return branches[0];
    std::string t;
    for (size_t i = 0; i < branches.size(); ++i) t += (i ? " | " : "") + branches[i].text;
    if (has_empty) {
      p.kind = Kind::kPrimary;
      p.text = "( " + t + " )?";
    } else {
      p.kind = Kind::kAlternation;
      p.text = t;
    }
    return p;
  }

  Piece sequence() {
    std::vector<Piece> items;
    while (!at_end() && peek() != '|' && peek() != ')') {
      Piece q = quantified();
      if (failed()) return {};
      if (q.kind == Kind::kEmpty) continue;
      if (q.kind == Kind::kLiteral && !items.empty() && items.back().kind == Kind::kLiteral) {
        items.back() = literal_piece(items.back().bytes + q.bytes);
      } else {
        items.push_back(std::move(q));
      }
    }
    if (items.empty()) return {};
    if (items.size() == 1) return items[0];
    Piece p;
    p.kind = Kind::kSequence;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) p.text += ' ';
      p.text += items[i].kind == Kind::kAlternation ? "( " + items[i].text + " )" : items[i].text;
    }
    return p;
  }

  // Parses {m}, {m,}, {m,n} at pos_; false (pos_ unchanged) when it is not a quantifier.
  bool braces(int& lo, int& hi) {
    size_t i = pos_ + 1;
    auto number = [&](int& v) {
      const size_t start = i;
      long long x = 0;
      while (i < end_ && re_[i] >= '0' && re_[i] <= '9') {
        x = std::min<long long>(x * 10 + (re_[i] - '0'), 1LL << 40);
        ++i;
      }
      v = static_cast<int>(std::min<long long>(x, 1LL << 30));
      return i > start;
    };
    if (!number(lo)) return false;
    hi = lo;
    if (i < end_ && re_[i] == ',') {
      ++i;
      if (!number(hi)) hi = -1;
    }
    if (i >= end_ || re_[i] != '}') return false;
    pos_ = i + 1;
    return true;
  }

  Piece quantified() {
    const size_t atom_at = pos_;
    Piece a = atom();
    if (failed()) return {};
    bool quantified_once = false;
    while (!at_end()) {
      const char c = peek();
      int lo = 0, hi = 0;
      const size_t q_at = pos_;
      if (c == '*') {
        lo = 0, hi = -1, ++pos_;
      } else if (c == '+') {
        lo = 1, hi = -1, ++pos_;
      } else if (c == '?') {
        lo = 0, hi = 1, ++pos_;
      } else if (c == '{') {
        if (!braces(lo, hi)) break;
      } else {
        break;
      }
      if (quantified_once) {
        fail(q_at, c == '+' ? "possessive quantifiers are not supported"
                            : "nothing to repeat (quantifier after a quantifier)");
        return {};
      }
      if (a.kind == Kind::kEmpty && atom_at == q_at) {
        fail(q_at, "nothing to repeat");
        return {};
      }
      if (hi != -1 && lo > hi) {
        fail(q_at, "repetition range out of order");
        return {};
      }
      if (lo > max_rep_ || hi > max_rep_) {
        fail(q_at, fmt::format("repetition count above {}", max_rep_));
        return {};
      }
      if (!at_end() && peek() == '?') ++pos_;  // lazy: same full-match language
      quantified_once = true;
      a = repeat(std::move(a), lo, hi);
    }
    return a;
  }

  static Piece repeat(Piece a, int lo, int hi) {
    if (a.kind == Kind::kEmpty || (lo == 0 && hi == 0)) return {};
    if (lo == 1 && hi == 1) return a;
    std::string base = a.text;
    if (a.kind == Kind::kSequence || a.kind == Kind::kAlternation ||
        (a.kind == Kind::kLiteral && a.bytes.size() > 1) ||
        (a.kind == Kind::kPrimary && !base.empty() && (base.back() == '?' || base.back() == '*' ||
                                                       base.back() == '+' || base.back() == '}')))
      base = "( " + base + " )";
    Piece p;
    p.kind = Kind::kPrimary;
    if (lo == 0 && hi == -1) {
      p.text = base + "*";
    } else if (lo == 1 && hi == -1) {
      p.text = base + "+";
    } else if (lo == 0 && hi == 1) {
      p.text = base + "?";
    } else if (hi == -1) {
      p.text = fmt::format("{}{{{},}}", base, lo);
    } else {
      p.text = fmt::format("{}{{{},{}}}", base, lo, hi);
    }
    return p;
  }

  // One code point of the regex text at pos_ (UTF-8 decoded).
  bool code_point(uint32_t& c) {
    const auto b = static_cast<unsigned char>(re_[pos_]);
    int n = 0;
    if (b < 0x80) {
      c = b, n = 1;
    } else if ((b & 0xE0) == 0xC0) {
      c = b & 0x1F, n = 2;
    } else if ((b & 0xF0) == 0xE0) {
      c = b & 0x0F, n = 3;
    } else if ((b & 0xF8) == 0xF0) {
      c = b & 0x07, n = 4;
    } else {
      fail(pos_, "invalid UTF-8");
      return false;
    }
    if (pos_ + n > end_) {
      fail(pos_, "invalid UTF-8");
      return false;
    }
    for (int k = 1; k < n; ++k) {
      const auto cb = static_cast<unsigned char>(re_[pos_ + k]);
      if ((cb & 0xC0) != 0x80) {
        fail(pos_, "invalid UTF-8");
        return false;
      }
      c = (c << 6) | (cb & 0x3F);
    }
    if (c > kMaxCodePoint || (c >= 0xD800 && c <= 0xDFFF)) {
      fail(pos_, "invalid UTF-8");
      return false;
    }
    pos_ += n;
    return true;
  }

  Piece char_piece(uint32_t c) {
    if (target_ == RegexTarget::kJsonStringBody) return literal_piece(json_escaped(c));
    return literal_piece(utf8(c));
  }

  Piece set_piece(const Ranges& set, size_t at) {
    const Ranges r = normalize(set);
    if (r.empty()) {
      fail(at, "the class matches nothing");
      return {};
    }
    if (r.size() == 1 && r[0].first == r[0].second) return char_piece(r[0].first);
    Piece p;
    p.kind = Kind::kPrimary;
    if (target_ == RegexTarget::kText) {
      p.text = set_text(r);
      return p;
    }
    // JSON string body: the plain characters, then the escaped ones.
    const Ranges special = normalize({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
    const Ranges plain = subtract(r, special);
    std::vector<std::string> alts;
    if (!plain.empty()) alts.push_back(set_text(plain));
    if (contains(r, '"')) alts.push_back(gbnf_literal("\\\""));
    if (contains(r, '\\')) alts.push_back(gbnf_literal("\\\\"));
    std::string shorts, low0, low1;
    const std::pair<char, char> short_forms[] = {{'\b', 'b'}, {'\f', 'f'}, {'\n', 'n'},
                                                 {'\r', 'r'}, {'\t', 't'}};
    for (const auto& [ctl, letter] : short_forms)
      if (contains(r, static_cast<uint32_t>(ctl))) shorts += letter;
    Ranges hex0, hex1;
    for (uint32_t c = 0; c < 0x20; ++c) {
      if (!contains(r, c)) continue;
      const uint32_t d = c & 0xF;
      Ranges& h = c < 0x10 ? hex0 : hex1;
      if (d < 10) {
        h.emplace_back('0' + d, '0' + d);
      } else {
        h.emplace_back('a' + d - 10, 'a' + d - 10);
        h.emplace_back('A' + d - 10, 'A' + d - 10);
      }
    }
    if (!shorts.empty()) {
      Ranges s;
      for (char ch : shorts) s.emplace_back(ch, ch);
      alts.push_back(gbnf_literal("\\") + " " + class_text(normalize(s), false));
    }
    if (!hex0.empty()) alts.push_back(gbnf_literal("\\u000") + " " + class_text(normalize(hex0), false));
    if (!hex1.empty()) alts.push_back(gbnf_literal("\\u001") + " " + class_text(normalize(hex1), false));
    if (alts.size() == 1) {
      p.text = alts[0];
      p.kind = alts[0][0] == '[' ? Kind::kPrimary : Kind::kSequence;
      return p;
    }
    p.text = "( ";
    for (size_t i = 0; i < alts.size(); ++i) p.text += (i ? " | " : "") + alts[i];
    p.text += " )";
    return p;
  }

  bool hex_digits(size_t n, uint32_t& v) {
    v = 0;
    for (size_t k = 0; k < n; ++k) {
      if (pos_ >= end_ || !std::isxdigit(static_cast<unsigned char>(re_[pos_]))) return false;
      const char h = re_[pos_++];
      v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
    }
    return true;
  }

  // After a backslash (pos_ at the escaped character): a single code point (class empty) or a
  // class escape (\d ...; class filled). `in_class`: inside [...] (\b is backspace there).
  bool escape(uint32_t& c, Ranges& cls, bool in_class) {
    const size_t at = pos_ - 1;
    if (at_end()) {
      fail(at, "trailing backslash");
      return false;
    }
    const char e = re_[pos_++];
    switch (e) {
      case 'd': cls = digit_set(); return true;
      case 'D': cls = complement(digit_set()); return true;
      case 'w': cls = word_set(); return true;
      case 'W': cls = complement(word_set()); return true;
      case 's': cls = space_set(); return true;
      case 'S': cls = complement(space_set()); return true;
      case 'n': c = '\n'; return true;
      case 'r': c = '\r'; return true;
      case 't': c = '\t'; return true;
      case 'v': c = '\v'; return true;
      case 'f': c = '\f'; return true;
      case '0': c = 0; return true;
      case 'b':
        if (in_class) {
          c = '\b';
          return true;
        }
        fail(at, "word-boundary assertions (\\b) are not supported");
        return false;
      case 'B': fail(at, "word-boundary assertions (\\B) are not supported"); return false;
      case 'x':
        if (!hex_digits(2, c)) {
          fail(at, "\\x needs two hex digits");
          return false;
        }
        return true;
      case 'u':
        if (!at_end() && peek() == '{') {
          ++pos_;
          c = 0;
          size_t n = 0;
          while (!at_end() && std::isxdigit(static_cast<unsigned char>(peek())) && n < 7) {
            uint32_t d;
            hex_digits(1, d);
            c = c * 16 + d;
            ++n;
          }
          if (n == 0 || at_end() || peek() != '}' || c > kMaxCodePoint) {
            fail(at, "bad \\u{...} escape");
            return false;
          }
          ++pos_;
        } else if (!hex_digits(4, c)) {
          fail(at, "\\u needs four hex digits");
          return false;
        }
        if (c >= 0xD800 && c <= 0xDFFF) {
          fail(at, "surrogate code points are not supported");
          return false;
        }
        return true;
      case 'c':
        if (!at_end() && std::isalpha(static_cast<unsigned char>(peek()))) {
          c = static_cast<uint32_t>(re_[pos_++]) % 32;
          return true;
        }
        fail(at, "\\c needs a letter");
        return false;
      case 'p':
      case 'P': fail(at, "Unicode property escapes (\\p) are not supported"); return false;
      case 'k': fail(at, "backreferences are not supported"); return false;
      default: break;
    }
    if (e >= '1' && e <= '9') {
      fail(at, "backreferences are not supported");
      return false;
    }
    if (std::isalnum(static_cast<unsigned char>(e))) {
      fail(at, fmt::format("unknown escape \\{}", e));
      return false;
    }
    if (static_cast<unsigned char>(e) >= 0x80) {
      --pos_;
      return code_point(c);
    }
    c = static_cast<uint32_t>(e);  // escaped punctuation
    return true;
  }

  Piece char_class() {
    const size_t at = pos_ - 1;
    bool negated = false;
    if (!at_end() && peek() == '^') {
      negated = true;
      ++pos_;
    }
    Ranges set;
    bool closed = false;
    while (!at_end()) {
      if (peek() == ']') {
        ++pos_;
        closed = true;
        break;
      }
      const size_t item_at = pos_;
      uint32_t lo = 0;
      Ranges cls;
      if (peek() == '\\') {
        ++pos_;
        if (!escape(lo, cls, true)) return {};
      } else if (!code_point(lo)) {
        return {};
      }
      if (!cls.empty()) {
        set.insert(set.end(), cls.begin(), cls.end());
        continue;
      }
      if (pos_ + 1 < end_ && peek() == '-' && re_[pos_ + 1] != ']') {
        ++pos_;
        uint32_t hi = 0;
        Ranges hcls;
        if (peek() == '\\') {
          ++pos_;
          if (!escape(hi, hcls, true)) return {};
        } else if (!code_point(hi)) {
          return {};
        }
        if (!hcls.empty()) {
          fail(item_at, "a class escape cannot end a range");
          return {};
        }
        if (hi < lo) {
          fail(item_at, "range out of order in class");
          return {};
        }
        set.emplace_back(lo, hi);
      } else {
        set.emplace_back(lo, lo);
      }
    }
    if (!closed) {
      fail(at, "unterminated class '['");
      return {};
    }
    Ranges r = normalize(set);
    if (negated) r = complement(r);
    return set_piece(r, at);
  }

  Piece group() {
    const size_t at = pos_ - 1;
    if (!at_end() && peek() == '?') {
      const std::string_view rest = re_.substr(pos_, std::min<size_t>(4, end_ - pos_));
      if (rest.starts_with("?:")) {
        pos_ += 2;
      } else if (rest.starts_with("?=") || rest.starts_with("?!") || rest.starts_with("?<=") ||
                 rest.starts_with("?<!")) {
        fail(at, "lookaround assertions are not supported");
        return {};
      } else if (rest.starts_with("?<") || rest.starts_with("?P<")) {
        pos_ += rest.starts_with("?P<") ? 3 : 2;
        while (!at_end() && peek() != '>') {
          if (!std::isalnum(static_cast<unsigned char>(peek())) && peek() != '_') {
            fail(pos_, "bad group name");
            return {};
          }
          ++pos_;
        }
        if (at_end()) {
          fail(at, "unterminated group name");
          return {};
        }
        ++pos_;
      } else if (rest.starts_with("?>")) {
        fail(at, "atomic groups are not supported");
        return {};
      } else {
        fail(at, "inline flags and other (?...) groups are not supported");
        return {};
      }
    }
    Piece inner = alternation();
    if (failed()) return {};
    if (at_end() || peek() != ')') {
      fail(at, "unbalanced '('");
      return {};
    }
    ++pos_;
    if (inner.kind == Kind::kAlternation || inner.kind == Kind::kSequence) {
      inner.text = "( " + inner.text + " )";
      inner.kind = Kind::kPrimary;
    }
    return inner;
  }

  Piece atom() {
    const size_t at = pos_;
    const char c = peek();
    switch (c) {
      case '(': ++pos_; return group();
      case '[': ++pos_; return char_class();
      case '.': ++pos_; return set_piece(dot_set(), at);
      case '^':
      case '$':
        fail(at, fmt::format("anchor '{}' is supported only at the very {}", c,
                             c == '^' ? "start" : "end"));
        return {};
      case '*':
      case '+':
      case '?': fail(at, "nothing to repeat"); return {};
      case '\\': {
        ++pos_;
        uint32_t cp = 0;
        Ranges cls;
        if (!escape(cp, cls, false)) return {};
        if (!cls.empty()) return set_piece(cls, at);
        return char_piece(cp);
      }
      default: break;
    }
    if (c == '{') {
      int lo, hi;
      if (braces(lo, hi)) {
        fail(at, "nothing to repeat");
        return {};
      }
    }
    uint32_t cp = 0;
    if (!code_point(cp)) return {};
    return char_piece(cp);
  }

  std::string_view re_;
  RegexTarget target_;
  int max_rep_;
  size_t pos_ = 0;
  size_t end_ = 0;
  Error error_;
};

}  // namespace

std::string gbnf_literal(std::string_view bytes) {
  std::string s = "\"";
  for (const char ch : bytes) {
    const auto b = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      s += '\\';
      s += ch;
    } else if (ch == '\n') {
      s += "\\n";
    } else if (ch == '\r') {
      s += "\\r";
    } else if (ch == '\t') {
      s += "\\t";
    } else if (b < 0x20 || b == 0x7F) {
      s += fmt::format("\\x{:02x}", b);
    } else {
      s += ch;
    }
  }
  return s + "\"";
}

bool is_gbnf_rule_name(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
}

Result<RegexExpression> regex_to_gbnf_expression(std::string_view regex, RegexTarget target,
                                                 int max_repetition) {
  return Parser(regex, target, max_repetition).run();
}

Result<std::string> regex_to_gbnf(std::string_view regex, const RegexGrammarOptions& opt) {
  const std::string root = opt.rule_prefix + opt.root_name;
  if (!is_gbnf_rule_name(root))
    return make_error("rule name '{}' must be non-empty and use only [a-zA-Z0-9-]", root);
  auto e = regex_to_gbnf_expression(regex, RegexTarget::kText, opt.max_repetition);
  if (!e) return e.error_value();
  if (e->expr.empty()) return Error("the regex matches only the empty string");
  return fmt::format("{} ::= {}\n", root, e->expr);
}

}  // namespace cadenza
