#include "tokenizer/sp_normalizer.h"

#include <algorithm>

#include "tokenizer/unicode_bytes.h"

namespace cadenza::tok {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

bool has_leaf(uint32_t u) { return ((u >> 8) & 1) != 0; }
uint32_t value(uint32_t u) { return u & 0x7FFFFFFFu; }
uint32_t label(uint32_t u) { return u & 0x800000FFu; }
uint32_t offset(uint32_t u) { return (u >> 10) << ((u & 0x200u) >> 6); }

}  // namespace

Result<SpNormalizer> SpNormalizer::build(std::vector<uint8_t> charsmap,
                                         bool remove_extra_whitespaces) {
  SpNormalizer n;
  n.remove_extra_whitespaces_ = remove_extra_whitespaces;
  if (charsmap.empty()) return n;
  if (charsmap.size() < 4) {
    return make_error("precompiled_charsmap has {} bytes, fewer than its 4-byte header",
                      charsmap.size());
  }
  const uint32_t trie_size = static_cast<uint32_t>(charsmap[0]) |
                             (static_cast<uint32_t>(charsmap[1]) << 8) |
                             (static_cast<uint32_t>(charsmap[2]) << 16) |
                             (static_cast<uint32_t>(charsmap[3]) << 24);
  if (trie_size > charsmap.size() - 4 || trie_size % 4 != 0 || trie_size == 0) {
    return make_error(
        "precompiled_charsmap: trie size {} is not a positive multiple of 4 within its {} bytes",
        trie_size, charsmap.size() - 4);
  }
  n.units_.resize(trie_size / 4);
  for (size_t i = 0; i < n.units_.size(); ++i) {
    const uint8_t* p = charsmap.data() + 4 + 4 * i;
    n.units_[i] = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                  (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
  }
  n.replacements_.assign(charsmap.begin() + 4 + trie_size, charsmap.end());
  return n;
}

std::pair<std::string_view, size_t> SpNormalizer::normalize_prefix(std::string_view text) const {
  // Longest mapped prefix (a common-prefix search through the double array).
  size_t best_len = 0;
  uint32_t best_value = 0;
  if (!units_.empty()) {
    const size_t n = units_.size();
    size_t pos = offset(units_[0]);
    const size_t limit = std::min(text.size(), kMaxKeyBytes);
    for (size_t i = 0; i < limit; ++i) {
      const auto byte = static_cast<uint8_t>(text[i]);
      pos ^= byte;
      if (pos >= n) break;
      const uint32_t unit = units_[pos];
      if (label(unit) != byte) break;
      pos ^= offset(unit);
      if (pos >= n) break;
      if (has_leaf(unit)) {
        best_len = i + 1;
        best_value = value(units_[pos]);
      }
    }
  }
  if (best_len > 0 && best_value < replacements_.size()) {
    const std::string_view rest = std::string_view(replacements_).substr(best_value);
    return {rest.substr(0, rest.find('\0')), best_len};
  }
  const Utf8Check c = check_utf8(text);
  if (c.kind != Utf8Check::kComplete) return {kReplacementChar, 1};
  return {text.substr(0, c.length), c.length};
}

void SpNormalizer::normalize(std::string_view text, bool add_dummy_prefix,
                             std::string& out) const {
  if (remove_extra_whitespaces_) {
    while (!text.empty()) {
      const auto [piece, consumed] = normalize_prefix(text);
      if (piece != " ") break;
      text.remove_prefix(consumed);
    }
  }
  if (text.empty()) return;
  const size_t start = out.size();
  if (add_dummy_prefix) out += kSpace;
  bool prev_space = remove_extra_whitespaces_;
  while (!text.empty()) {
    auto [piece, consumed] = normalize_prefix(text);
    text.remove_prefix(consumed);
    if (remove_extra_whitespaces_) {
      while (prev_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    }
    if (!piece.empty()) {
      for (char c : piece) {
        if (c == ' ') {
          out += kSpace;
        } else {
          out.push_back(c);
        }
      }
      prev_space = piece.back() == ' ';
    }
    if (!remove_extra_whitespaces_) prev_space = false;
  }
  if (remove_extra_whitespaces_) {
    while (out.size() >= start + kSpace.size() &&
           std::string_view(out).substr(out.size() - kSpace.size()) == kSpace) {
      out.resize(out.size() - kSpace.size());
    }
  }
}

}  // namespace cadenza::tok
