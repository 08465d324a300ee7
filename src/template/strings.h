// Python str semantics over UTF-8 std::string: what templates call on strings (strip, split,
// find, slicing, case changes, repr) must count and cut code points, not bytes, and treat
// whitespace the way Python's str.isspace() does.
//
// Input need not be valid UTF-8: an invalid byte is decoded as the lone surrogate U+DC80..U+DCFF
// (Python's "surrogateescape") and encoded back to the same byte, so nothing is lost or crashes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cadenza::tmpl::pystr {

std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
void append_utf8(std::string& out, char32_t cp);
bool is_ascii(std::string_view s);
// Number of code points (Python len()).
size_t length(std::string_view s);

bool is_space(char32_t c);
bool is_upper(char32_t c);
bool is_lower(char32_t c);
char32_t to_upper(char32_t c);  // ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic, fullwidth
char32_t to_lower(char32_t c);
bool is_alpha(char32_t c);
bool is_digit(char32_t c);
// Python's \w in a regex (letters, digits, underscore), approximated outside ASCII.
bool is_word(char32_t c);

// str.strip/lstrip/rstrip; `chars` absent: whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split / str.rsplit; `sep` absent: runs of whitespace. maxsplit < 0: no limit.
// `sep` must not be empty (the caller reports Python's ValueError).
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string swapcase(std::string_view s);
std::string capitalize(std::string_view s);  // str.capitalize
std::string title(std::string_view s);       // str.title
std::string jinja_title(std::string_view s);  // Jinja2's |title filter (splits on -, space, brackets)

// str.replace; count < 0: all. An empty `old` inserts between code points, as Python does.
std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    int64_t count);
// str.count over the whole string.
int64_t count(std::string_view s, std::string_view sub);
// str.find / str.rfind with Python's optional start/end (code point indices); -1 if absent.
int64_t find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
             std::optional<int64_t> end, bool reverse);
// str.center/ljust/rjust with a one-code-point fill.
std::string pad(std::string_view s, int64_t width, char32_t fill, char how /* c l r */);

// Python's repr() of a str, quotes included.
std::string repr(std::string_view s);

// The positions a Python slice [start:stop:step] selects in a sequence of `len` items.
// step must not be 0.
std::vector<int64_t> slice_positions(int64_t len, std::optional<int64_t> start,
                                     std::optional<int64_t> stop, int64_t step);
// Python index normalisation: negative counts from the end; nullopt when out of range.
std::optional<size_t> normalize_index(int64_t i, size_t len);

// Python repr() of a float: shortest round-trip digits, "1.0", "1e+16", "1.5e-05", "inf", "nan".
std::string float_repr(double d);

}  // namespace cadenza::tmpl::pystr
