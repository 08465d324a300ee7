#include "template/strings.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "util/utf8.h"

namespace cadenza::tmpl::pystr {

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    int n = 0;
    char32_t cp = 0;
    if ((b0 & 0xE0) == 0xC0) { n = 1; cp = b0 & 0x1F; }
    else if ((b0 & 0xF0) == 0xE0) { n = 2; cp = b0 & 0x0F; }
    else if ((b0 & 0xF8) == 0xF0) { n = 3; cp = b0 & 0x07; }
    bool ok = n > 0 && i + n < s.size();
    if (ok) {
      for (int k = 1; k <= n; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xC0) != 0x80) { ok = false; break; }
        cp = (cp << 6) | (b & 0x3F);
      }
    }
    // Reject overlong forms, surrogates and out-of-range values like a strict decoder.
    if (ok) {
      static constexpr char32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
      if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) ok = false;
    }
    if (ok) {
      out.push_back(cp);
      i += n + 1;
    } else {
      out.push_back(0xDC00 + b0);  // surrogateescape
      ++i;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp >= 0xDC80 && cp <= 0xDCFF) {  // an escaped invalid byte: restore it
    out.push_back(static_cast<char>(cp - 0xDC00));
  } else {
    cadenza::append_utf8(out, static_cast<uint32_t>(cp));
  }
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

size_t length(std::string_view s) {
  if (is_ascii(s)) return s.size();
  return decode(s).size();
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {

// Simple one-to-one case pairs for the scripts chat content commonly uses. Returns the other
// case of `c`, or `c` itself.
char32_t other_case(char32_t c, bool want_upper) {
  auto pair = [&](char32_t up, char32_t lo) { return want_upper ? (c == lo ? up : c) : (c == up ? lo : c); };
  if (c < 0x80) {
    if (want_upper && c >= 'a' && c <= 'z') return c - 32;
    if (!want_upper && c >= 'A' && c <= 'Z') return c + 32;
    return c;
  }
  if (c >= 0xC0 && c <= 0xFE && c != 0xD7 && c != 0xF7 && c != 0xDF) {
    if (c <= 0xDE) return want_upper ? c : c + 0x20;
    return want_upper ? c - 0x20 : c;
  }
  if (c == 0xFF || c == 0x178) return pair(0x178, 0xFF);
  if (c >= 0x100 && c <= 0x17F) {
    const bool even_upper = (c <= 0x137) || (c >= 0x14A && c <= 0x177);
    const bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (even_upper) {
      const bool up = (c % 2) == 0;
      return want_upper ? (up ? c : c - 1) : (up ? c + 1 : c);
    }
    if (odd_upper) {
      const bool up = (c % 2) == 1;
      return want_upper ? (up ? c : c - 1) : (up ? c + 1 : c);
    }
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return want_upper ? c : c + 0x20;
  if (c >= 0x3B1 && c <= 0x3C9) return want_upper ? (c == 0x3C2 ? 0x3A3 : c - 0x20) : c;
  if (c == 0x386 || c == 0x3AC) return pair(0x386, 0x3AC);
  if (c >= 0x388 && c <= 0x38A) return want_upper ? c : c + 0x25;
  if (c >= 0x3AD && c <= 0x3AF) return want_upper ? c - 0x25 : c;
  if (c == 0x38C || c == 0x3CC) return pair(0x38C, 0x3CC);
  if (c == 0x38E || c == 0x3CD) return pair(0x38E, 0x3CD);
  if (c == 0x38F || c == 0x3CE) return pair(0x38F, 0x3CE);
  if (c >= 0x410 && c <= 0x42F) return want_upper ? c : c + 0x20;
  if (c >= 0x430 && c <= 0x44F) return want_upper ? c - 0x20 : c;
  if (c >= 0x400 && c <= 0x40F) return want_upper ? c : c + 0x50;
  if (c >= 0x450 && c <= 0x45F) return want_upper ? c - 0x50 : c;
  if (c >= 0xFF21 && c <= 0xFF3A) return want_upper ? c : c + 0x20;
  if (c >= 0xFF41 && c <= 0xFF5A) return want_upper ? c - 0x20 : c;
  return c;
}

bool is_cased(char32_t c) { return other_case(c, true) != c || other_case(c, false) != c || c == 0xDF; }

template <typename Fn>
std::string map_chars(std::string_view s, Fn fn) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& ch : out) ch = static_cast<char>(fn(static_cast<char32_t>(ch)));
    return out;
  }
  std::u32string u = decode(s);
  for (char32_t& c : u) c = fn(c);
  return encode(u);
}

}  // namespace

char32_t to_upper(char32_t c) { return other_case(c, true); }
char32_t to_lower(char32_t c) { return other_case(c, false); }
bool is_upper(char32_t c) { return is_cased(c) && to_lower(c) != c; }
bool is_lower(char32_t c) { return (is_cased(c) && to_upper(c) != c) || c == 0xDF; }

bool is_alpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return is_word(c) && !is_digit(c);
}

bool is_digit(char32_t c) { return (c >= '0' && c <= '9') || (c >= 0xFF10 && c <= 0xFF19); }

bool is_word(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  if (is_space(c)) return false;
  // Punctuation and symbol blocks; everything else outside ASCII counts as a word character
  // (letters and ideographs dominate real text).
  if (c < 0xC0) return c == 0xAA || c == 0xB5 || c == 0xBA || c == 0xB2 || c == 0xB3 || c == 0xB9 ||
                       (c >= 0xBC && c <= 0xBE);
  if (c == 0xD7 || c == 0xF7) return false;
  if (c >= 0x2000 && c <= 0x2BFF) return false;
  if (c >= 0x3000 && c <= 0x303F) return false;
  if ((c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) || (c >= 0xFF3B && c <= 0xFF40) ||
      (c >= 0xFF5B && c <= 0xFF65))
    return false;
  if (c >= 0xDC80 && c <= 0xDCFF) return false;
  if (c >= 0x1F000 && c <= 0x1FAFF) return false;  // emoji and pictographs
  return true;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  if (!chars && is_ascii(s)) {
    size_t b = 0, e = s.size();
    auto sp = [](char c) { return is_space(static_cast<unsigned char>(c)); };
    if (left) while (b < e && sp(s[b])) ++b;
    if (right) while (e > b && sp(s[e - 1])) --e;
    return std::string(s.substr(b, e - b));
  }
  std::u32string u = decode(s);
  std::u32string set = chars ? decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_space(c); };
  size_t b = 0, e = u.size();
  if (left) while (b < e && strip_it(u[b])) ++b;
  if (right) while (e > b && strip_it(u[e - 1])) --e;
  return encode(std::u32string_view(u).substr(b, e - b));
}

namespace {

// Whitespace runs are found on code points; the results are re-encoded slices.
std::vector<std::string> split_ws(std::string_view s, int64_t maxsplit, bool from_right) {
  std::u32string u = decode(s);
  std::vector<std::pair<size_t, size_t>> parts;  // [begin, end) code point ranges
  if (!from_right) {
    size_t i = 0;
    const size_t n = u.size();
    while (true) {
      while (i < n && is_space(u[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = n;
        while (e > i && is_space(u[e - 1])) --e;
        parts.emplace_back(i, e);
        break;
      }
      size_t j = i;
      while (j < n && !is_space(u[j])) ++j;
      parts.emplace_back(i, j);
      i = j;
    }
  } else {
    size_t i = u.size();
    while (true) {
      while (i > 0 && is_space(u[i - 1])) --i;
      if (i == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t b = 0;
        while (b < i && is_space(u[b])) ++b;
        parts.emplace_back(b, i);
        break;
      }
      size_t j = i;
      while (j > 0 && !is_space(u[j - 1])) --j;
      parts.emplace_back(j, i);
      i = j;
    }
    std::reverse(parts.begin(), parts.end());
  }
  std::vector<std::string> out;
  out.reserve(parts.size());
  for (auto [b, e] : parts) out.push_back(encode(std::u32string_view(u).substr(b, e - b)));
  return out;
}

}  // namespace

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return split_ws(s, maxsplit, false);
  std::vector<std::string> out;
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    size_t f = s.find(*sep, pos);
    if (f == std::string_view::npos) break;
    out.emplace_back(s.substr(pos, f - pos));
    pos = f + sep->size();
  }
  out.emplace_back(s.substr(pos));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return split_ws(s, maxsplit, true);
  std::vector<std::string> out;
  size_t end = s.size();
  int64_t splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    if (end < sep->size()) break;
    size_t f = s.rfind(*sep, end - sep->size());
    if (f == std::string_view::npos) break;
    out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
    end = f;
    ++splits;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::u32string u = decode(s);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  auto is_break = [](char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
  };
  while (i < u.size()) {
    if (!is_break(u[i])) { ++i; continue; }
    size_t brk_len = (u[i] == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ? 2 : 1;
    size_t end = keepends ? i + brk_len : i;
    out.push_back(encode(std::u32string_view(u).substr(start, end - start)));
    i += brk_len;
    start = i;
  }
  if (start < u.size()) out.push_back(encode(std::u32string_view(u).substr(start)));
  return out;
}

std::string upper(std::string_view s) { return map_chars(s, to_upper); }
std::string lower(std::string_view s) { return map_chars(s, to_lower); }
std::string swapcase(std::string_view s) {
  return map_chars(s, [](char32_t c) { return is_upper(c) ? to_lower(c) : to_upper(c); });
}

std::string capitalize(std::string_view s) {
  std::u32string u = decode(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? to_upper(u[i]) : to_lower(u[i]);
  return encode(u);
}

std::string title(std::string_view s) {
  std::u32string u = decode(s);
  bool prev_cased = false;
  for (char32_t& c : u) {
    const bool cased = is_cased(c);
    c = prev_cased ? to_lower(c) : to_upper(c);
    prev_cased = cased;
  }
  return encode(u);
}

std::string jinja_title(std::string_view s) {
  // Jinja2: split on runs of [-\s({\[<] (kept), then each piece: first char upper, rest lower.
  std::u32string u = decode(s);
  auto is_sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(c); };
  size_t i = 0;
  while (i < u.size()) {
    const bool sep = is_sep(u[i]);
    size_t j = i;
    while (j < u.size() && is_sep(u[j]) == sep) ++j;
    if (!sep) {
      u[i] = to_upper(u[i]);
      for (size_t k = i + 1; k < j; ++k) u[k] = to_lower(u[k]);
    }
    i = j;
  }
  return encode(u);
}

std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count) {
  std::string out;
  if (old.empty()) {
    std::u32string u = decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || done < count) { out.append(with); ++done; }
      if (i < u.size()) append_utf8(out, u[i]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(with);
    pos = f + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
  int64_t n = 0;
  size_t pos = 0;
  while ((pos = s.find(sub, pos)) != std::string_view::npos) { ++n; pos += sub.size(); }
  return n;
}

int64_t find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
             std::optional<int64_t> end, bool reverse) {
  std::u32string u = decode(s);
  std::u32string su = decode(sub);
  const auto len = static_cast<int64_t>(u.size());
  auto clamp = [&](int64_t i) {
    if (i < 0) i += len;
    return std::clamp<int64_t>(i, 0, len);
  };
  const int64_t b = start ? clamp(*start) : 0;
  const int64_t e = end ? clamp(*end) : len;
  if (e - b < static_cast<int64_t>(su.size())) return -1;
  std::u32string_view hay = std::u32string_view(u).substr(b, e - b);
  size_t f = reverse ? hay.rfind(su) : hay.find(su);
  return f == std::u32string_view::npos ? -1 : b + static_cast<int64_t>(f);
}

std::string pad(std::string_view s, int64_t width, char32_t fill, char how) {
  const auto len = static_cast<int64_t>(length(s));
  if (width <= len) return std::string(s);
  const int64_t total = width - len;
  int64_t left = 0;
  if (how == 'c') left = total / 2 + (total & width & 1);  // CPython's centring rule
  else if (how == 'r') left = total;
  std::string fill_s;
  append_utf8(fill_s, fill);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill_s;
  out.append(s);
  for (int64_t i = 0; i < total - left; ++i) out += fill_s;
  return out;
}

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decode(s)) {
    char buf[16];
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') { out += "\\n"; }
    else if (c == '\r') { out += "\\r"; }
    else if (c == '\t') { out += "\\t"; }
    else if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0xA0) || c == 0xAD) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
               (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF ||
               (c >= 0xD800 && c <= 0xDFFF) || (c >= 0xE000 && c <= 0xF8FF) ||
               (c >= 0xFFF9 && c <= 0xFFFB)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      append_utf8(out, c);
    }
  }
  out.push_back(quote);
  return out;
}

std::vector<int64_t> slice_positions(int64_t len, std::optional<int64_t> start, std::optional<int64_t> stop,
                                     int64_t step) {
  int64_t b, e;
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt, int64_t lo, int64_t hi) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) { x += len; if (x < 0) x = lo; }
    else if (x > hi) x = hi;
    return x;
  };
  std::vector<int64_t> out;
  if (step > 0) {
    b = adjust(start, 0, 0, len);
    e = adjust(stop, len, 0, len);
    for (int64_t i = b; i < e; i += step) {  // written so that i + step never overflows
      out.push_back(i);
      if (step >= e - i) break;
    }
  } else {
    b = adjust(start, len - 1, -1, len - 1);
    e = adjust(stop, -1, -1, len - 1);
    for (int64_t i = b; i > e; i += step) {
      out.push_back(i);
      if (-(step + 1) >= i - e - 1) break;  // i + step <= e, without computing i + step
    }
  }
  return out;
}

std::optional<size_t> normalize_index(int64_t i, size_t len) {
  const auto n = static_cast<int64_t>(len);
  if (i < 0) i += n;
  if (i < 0 || i >= n) return std::nullopt;
  return static_cast<size_t>(i);
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(r.ptr - buf));
  const bool neg = !sci.empty() && sci[0] == '-';
  if (neg) sci.remove_prefix(1);
  const size_t epos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, epos)) if (c != '.') digits.push_back(c);
  int exp = 0;
  std::from_chars(sci.data() + epos + 1 + (sci[epos + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exp);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int n = static_cast<int>(digits.size());
  std::string out = neg ? "-" : "";
  // Appends only: GCC 12 warns (falsely) on `"." + std::string` temporaries here.
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (n <= exp + 1) {
        out.append(digits).append(static_cast<size_t>(exp + 1 - n), '0').append(".0");
      } else {
        out.append(digits, 0, static_cast<size_t>(exp + 1)).push_back('.');
        out.append(digits, static_cast<size_t>(exp + 1));
      }
    } else {
      out.append("0.").append(static_cast<size_t>(-exp - 1), '0').append(digits);
    }
  } else {
    out.push_back(digits[0]);
    if (n > 1) {
      out.push_back('.');
      out.append(digits, 1);
    }
    out.append(exp < 0 ? "e-" : "e+");
    const int a = exp < 0 ? -exp : exp;
    if (a < 10) out.push_back('0');
    out.append(std::to_string(a));
  }
  return out;
}

}  // namespace cadenza::tmpl::pystr
