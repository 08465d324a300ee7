#include "template/lexer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "template/strings.h"

namespace cadenza::tmpl {
namespace {

bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  Result<std::vector<Token>> run() {
    bool line_starting = true;  // Jinja2: the previous match ended with "\n" (or start of input)
    const size_t n = src_.size();
    while (pos_ < n) {
      const size_t tag = find_tag(pos_);
      if (tag == std::string::npos) {
        emit_text(pos_, n);
        break;
      }
      const char kind = src_[tag + 1];
      size_t after = tag + 2;
      char sign = 0;
      if (after < n && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      size_t raw_end = 0;
      const bool raw = kind == '%' && match_raw_begin(after, &raw_end);

      // Whitespace control of the text before the tag.
      size_t text_end = trim_before(pos_, tag, sign, kind != '{', line_starting);
      emit_text(pos_, text_end);

      if (raw) {
        auto st = lex_raw(tag, raw_end, &line_starting);
        if (!st) return st.error_value();
        continue;
      }
      if (kind == '#') {
        auto st = lex_comment(tag, after, &line_starting);
        if (!st) return st.error_value();
        continue;
      }
      auto st = lex_tag(tag, after, kind == '%');
      if (!st) return st.error_value();
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    Token eof;
    eof.kind = TokenKind::kEof;
    set_pos(eof, n);
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  Error error_at(size_t offset, std::string_view msg) const {
    Token t;
    set_pos(t, offset);
    return make_error("TemplateSyntaxError at {}:{}: {}", t.line, t.col, msg);
  }

  void set_pos(Token& t, size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    t.line = static_cast<uint32_t>(line);
    t.col = static_cast<uint32_t>(offset - line_starts_[line - 1] + 1);
  }

  size_t find_tag(size_t from) const {
    size_t i = from;
    while ((i = src_.find('{', i)) != std::string::npos) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
      ++i;
    }
    return std::string::npos;
  }

  // Is [b, e) all Python whitespace (and non-empty)?
  bool all_space(size_t b, size_t e) const {
    if (b >= e) return false;
    std::string_view v(src_.data() + b, e - b);
    if (pystr::is_ascii(v))
      return std::all_of(v.begin(), v.end(), [](char c) { return pystr::is_space(static_cast<unsigned char>(c)); });
    for (char32_t c : pystr::decode(v)) if (!pystr::is_space(c)) return false;
    return true;
  }

  // Applies `-` (rstrip) or lstrip_blocks to the text [b, tag); returns the new end.
  size_t trim_before(size_t b, size_t tag, char sign, bool lstrip_kind, bool line_starting) const {
    if (sign == '-') {
      std::string_view v(src_.data() + b, tag - b);
      return b + pystr::strip(v, std::nullopt, false, true).size();
    }
    if (sign == '+' || !lstrip_kind) return tag;
    size_t nl = src_.rfind('\n', tag == 0 ? 0 : tag - 1);
    size_t l_pos = (nl == std::string::npos || nl < b) ? b : nl + 1;
    if ((l_pos > b || line_starting) && all_space(l_pos, tag)) return l_pos;
    return tag;
  }

  // After `-%}`-style ends: skip all whitespace.
  size_t skip_space(size_t i) const {
    while (i < src_.size()) {
      const auto c = static_cast<unsigned char>(src_[i]);
      if (c < 0x80) {
        if (!pystr::is_space(c)) break;
        ++i;
        continue;
      }
      // Decode one code point to test non-ASCII whitespace.
      size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
      if (i + len > src_.size()) break;
      std::u32string u = pystr::decode(std::string_view(src_.data() + i, len));
      if (u.size() != 1 || !pystr::is_space(u[0])) break;
      i += len;
    }
    return i;
  }

  void emit_text(size_t b, size_t e) {
    if (b >= e) return;
    Token t;
    t.kind = TokenKind::kText;
    t.text = src_.substr(b, e - b);
    set_pos(t, b);
    tokens_.push_back(std::move(t));
  }

  bool match_word(size_t i, std::string_view w) const { return src_.compare(i, w.size(), w) == 0; }

  // `{%[-+]? raw [-]%}`: `after` is just past the sign. Sets *end past the tag (and the
  // whitespace a `-%}` strips).
  bool match_raw_begin(size_t after, size_t* end) const {
    size_t i = after;
    while (i < src_.size() && ascii_space(src_[i])) ++i;
    if (!match_word(i, "raw")) return false;
    i += 3;
    while (i < src_.size() && ascii_space(src_[i])) ++i;
    if (match_word(i, "-%}")) { *end = skip_space(i + 3); return true; }
    if (match_word(i, "%}")) { *end = i + 2; return true; }
    return false;
  }

  Status lex_raw(size_t tag, size_t body, bool* line_starting) {
    const bool body_line_start = body > 0 && src_[body - 1] == '\n';
    size_t i = body;
    while ((i = src_.find("{%", i)) != std::string::npos) {
      size_t j = i + 2;
      char sign = 0;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) sign = src_[j++];
      while (j < src_.size() && ascii_space(src_[j])) ++j;
      if (!match_word(j, "endraw")) { i += 2; continue; }
      j += 6;
      while (j < src_.size() && ascii_space(src_[j])) ++j;
      size_t end;
      if (match_word(j, "+%}")) end = j + 3;
      else if (match_word(j, "-%}")) end = skip_space(j + 3);
      else if (match_word(j, "%}")) end = j + 2 + (j + 2 < src_.size() && src_[j + 2] == '\n' ? 1 : 0);
      else { i += 2; continue; }
      emit_text(body, trim_before(body, i, sign, true, body_line_start));
      pos_ = end;
      *line_starting = end > 0 && src_[end - 1] == '\n';
      return {};
    }
    return error_at(tag, "Missing end of raw directive");
  }

  Status lex_comment(size_t tag, size_t content, bool* line_starting) {
    size_t q = src_.find("#}", content);
    if (q == std::string::npos) return error_at(tag, "Missing end of comment tag");
    size_t end;
    if (q > content && src_[q - 1] == '-') end = skip_space(q + 2);
    else if (q > content && src_[q - 1] == '+') end = q + 2;
    else end = q + 2 + (q + 2 < src_.size() && src_[q + 2] == '\n' ? 1 : 0);
    pos_ = end;
    *line_starting = end > 0 && src_[end - 1] == '\n';
    return {};
  }

  Status lex_tag(size_t tag, size_t i, bool block) {
    Token begin;
    begin.kind = block ? TokenKind::kBlockBegin : TokenKind::kVarBegin;
    set_pos(begin, tag);
    tokens_.push_back(std::move(begin));
    std::vector<char> balance;  // closers expected, innermost last
    const size_t n = src_.size();
    while (true) {
      while (i < n && ascii_space(src_[i])) ++i;
      if (i >= n) return error_at(tag, block ? "unexpected end of template: missing '%}'"
                                             : "unexpected end of template: missing '}}'");
      if (balance.empty()) {
        size_t end = 0;
        if (block) {
          if (match_word(i, "-%}")) end = skip_space(i + 3);
          else if (match_word(i, "+%}")) end = i + 3;
          else if (match_word(i, "%}")) end = i + 2 + (i + 2 < n && src_[i + 2] == '\n' ? 1 : 0);
        } else {
          if (match_word(i, "-}}")) end = skip_space(i + 3);
          else if (match_word(i, "}}")) end = i + 2;
        }
        if (end) {
          Token t;
          t.kind = block ? TokenKind::kBlockEnd : TokenKind::kVarEnd;
          set_pos(t, i);
          tokens_.push_back(std::move(t));
          pos_ = end;
          return {};
        }
      }
      auto st = lex_token(&i, &balance);
      if (!st) return st;
    }
  }

  Status lex_token(size_t* pi, std::vector<char>* balance) {
    size_t i = *pi;
    const size_t n = src_.size();
    const char c = src_[i];
    Token t;
    set_pos(t, i);
    auto is_digit = [](char ch) { return ch >= '0' && ch <= '9'; };
    auto is_name_start = [](char ch) {
      return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || static_cast<unsigned char>(ch) >= 0x80;
    };
    if (is_digit(c)) return lex_number(pi, std::move(t));
    if (is_name_start(c)) {
      size_t j = i;
      while (j < n && (is_name_start(src_[j]) || is_digit(src_[j]))) ++j;
      t.kind = TokenKind::kName;
      t.text = src_.substr(i, j - i);
      tokens_.push_back(std::move(t));
      *pi = j;
      return {};
    }
    if (c == '\'' || c == '"') return lex_string(pi, std::move(t));
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (match_word(i, op)) {
        t.kind = TokenKind::kOp;
        t.text = std::string(op);
        tokens_.push_back(std::move(t));
        *pi = i + 2;
        return {};
      }
    }
    static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string_view::npos) {
      return error_at(i, fmt::format("unexpected char {}", pystr::repr(std::string(1, c))));
    }
    if (c == '(' || c == '[' || c == '{') {
      balance->push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance->empty()) return error_at(i, fmt::format("unexpected '{}'", c));
      const char want = balance->back();
      balance->pop_back();
      if (want != c) return error_at(i, fmt::format("unexpected '{}', expected '{}'", c, want));
    }
    t.kind = TokenKind::kOp;
    t.text = std::string(1, c);
    tokens_.push_back(std::move(t));
    *pi = i + 1;
    return {};
  }

  Status lex_number(size_t* pi, Token t) {
    const size_t n = src_.size();
    size_t i = *pi;
    auto is_digit = [](char ch) { return ch >= '0' && ch <= '9'; };
    auto digits = [&](size_t j) {  // \d+(_?\d+)* style run; returns end (j if none)
      size_t k = j;
      while (k < n && (is_digit(src_[k]) || (src_[k] == '_' && k > j && k + 1 < n && is_digit(src_[k + 1])))) ++k;
      return k;
    };
    // Prefixed integers.
    if (src_[i] == '0' && i + 1 < n && std::string_view("xXoObB").find(src_[i + 1]) != std::string_view::npos) {
      const char p = static_cast<char>(src_[i + 1] | 0x20);
      const int base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
      size_t j = i + 2;
      std::string clean;
      while (j < n) {
        const char ch = src_[j];
        const int d = (ch >= '0' && ch <= '9') ? ch - '0' : ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f') ? (ch | 0x20) - 'a' + 10 : -1;
        if (ch == '_') { ++j; continue; }
        if (d < 0 || d >= base) break;
        clean.push_back(ch);
        ++j;
      }
      if (clean.empty()) return error_at(i, "invalid integer literal");
      auto r = std::from_chars(clean.data(), clean.data() + clean.size(), t.int_value, base);
      if (r.ec != std::errc()) return error_at(i, "integer literal too large");
      t.kind = TokenKind::kInt;
      t.text = src_.substr(i, j - i);
      tokens_.push_back(std::move(t));
      *pi = j;
      return {};
    }
    size_t j = digits(i);
    bool is_float = false;
    // A float never directly follows '.', so `x.0.1` stays item access (Jinja2's lookbehind).
    const bool after_dot = !tokens_.empty() && tokens_.back().kind == TokenKind::kOp && tokens_.back().text == "." &&
                           i > 0 && src_[i - 1] == '.';
    if (!after_dot) {
      size_t k = j;
      if (k + 1 < n && src_[k] == '.' && is_digit(src_[k + 1])) { k = digits(k + 1); is_float = true; }
      if (k < n && (src_[k] == 'e' || src_[k] == 'E')) {
        size_t m = k + 1;
        if (m < n && (src_[m] == '+' || src_[m] == '-')) ++m;
        if (m < n && is_digit(src_[m])) { k = digits(m); is_float = true; }
      }
      if (is_float) j = k;
    }
    std::string clean;
    for (size_t k = i; k < j; ++k) if (src_[k] != '_') clean.push_back(src_[k]);
    t.text = src_.substr(i, j - i);
    if (is_float) {
      t.kind = TokenKind::kFloat;
      t.float_value = std::strtod(clean.c_str(), nullptr);
    } else {
      t.kind = TokenKind::kInt;
      auto r = std::from_chars(clean.data(), clean.data() + clean.size(), t.int_value);
      if (r.ec != std::errc()) return error_at(i, "integer literal too large");
    }
    tokens_.push_back(std::move(t));
    *pi = j;
    return {};
  }

  // Python string literal with the escapes of the "unicode-escape" codec.
  Status lex_string(size_t* pi, Token t) {
    const size_t n = src_.size();
    const size_t start = *pi;
    const char quote = src_[start];
    size_t j = start + 1;
    while (j < n && src_[j] != quote) j += (src_[j] == '\\') ? 2 : 1;
    if (j >= n) return error_at(start, "unterminated string literal");
    std::u32string raw = pystr::decode(std::string_view(src_.data() + start + 1, j - start - 1));
    std::u32string out;
    for (size_t k = 0; k < raw.size(); ++k) {
      const char32_t ch = raw[k];
      if (ch != '\\' || k + 1 >= raw.size()) { out.push_back(ch); continue; }
      const char32_t e = raw[++k];
      auto hex = [&](int count) -> int64_t {
        int64_t v = 0;
        for (int d = 1; d <= count; ++d) {
          if (k + d >= raw.size()) return -1;
          const char32_t h = raw[k + d];
          int x = (h >= '0' && h <= '9') ? int(h - '0') : (h >= 'a' && h <= 'f') ? int(h - 'a' + 10) : (h >= 'A' && h <= 'F') ? int(h - 'A' + 10) : -1;
          if (x < 0) return -1;
          v = v * 16 + x;
        }
        k += count;
        return v;
      };
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back(0x07); break;
        case 'b': out.push_back(0x08); break;
        case 'f': out.push_back(0x0C); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back(0x0B); break;
        case 'x': case 'u': case 'U': {
          const int count = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          const int64_t v = hex(count);
          if (v < 0) return error_at(start, fmt::format("truncated \\{}{} escape", static_cast<char>(e), std::string(count, 'X')));
          if (v > 0x10FFFF) return error_at(start, "illegal Unicode character");
          out.push_back(static_cast<char32_t>(v));
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = e - '0';
            for (int d = 0; d < 2 && k + 1 < raw.size() && raw[k + 1] >= '0' && raw[k + 1] <= '7'; ++d) v = v * 8 + (raw[++k] - '0');
            out.push_back(v);
          } else if (e == 'N') {
            return error_at(start, "\\N{...} escapes are not supported");
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    t.kind = TokenKind::kString;
    t.text = pystr::encode(out);
    tokens_.push_back(std::move(t));
    *pi = j + 1;
    return {};
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::vector<Token>> lex(std::string_view source) {
  // Newline normalisation and the dropped trailing newline (keep_trailing_newline=False).
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src.push_back(source[i]);
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(std::move(src)).run();
}

}  // namespace cadenza::tmpl
