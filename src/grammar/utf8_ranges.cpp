#include "grammar/utf8_ranges.h"

#include <algorithm>

#include "util/utf8.h"

namespace cadenza::grammar {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Emits the byte sequences of [lo, hi], whose code points all have the same UTF-8 length. The
// range is split until every continuation byte spans its full 0x80..0xBF wherever a higher byte
// varies; then each byte position is a plain range between the encodings of lo and hi.
void emit_same_length(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>& out) {
  std::string a, b;
  append_utf8(a, lo);
  const size_t n = a.size();
  for (size_t i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        emit_same_length(lo, lo | m, out);
        emit_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        emit_same_length(lo, (hi & ~m) - 1, out);
        emit_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  append_utf8(b, hi);
  std::vector<ByteRange> seq(n);
  for (size_t k = 0; k < n; ++k) {
    seq[k] = {static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k])};
  }
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges) {
  std::vector<CodePointRange> clipped;
  for (CodePointRange r : ranges) {
    if (r.lo > r.hi || r.lo > kMaxCodePoint) continue;
    r.hi = std::min(r.hi, kMaxCodePoint);
    // Remove the surrogates: they have no UTF-8 encoding.
    if (r.lo < 0xD800 && r.hi > 0xDFFF) {
      clipped.push_back({r.lo, 0xD7FF});
      clipped.push_back({0xE000, r.hi});
    } else if (r.lo >= 0xD800 && r.hi <= 0xDFFF) {
      continue;
    } else if (r.lo >= 0xD800 && r.lo <= 0xDFFF) {
      clipped.push_back({0xE000, r.hi});
    } else if (r.hi >= 0xD800 && r.hi <= 0xDFFF) {
      clipped.push_back({r.lo, 0xD7FF});
    } else {
      clipped.push_back(r);
    }
  }
  std::sort(clipped.begin(), clipped.end(),
            [](const CodePointRange& x, const CodePointRange& y) { return x.lo < y.lo; });
  std::vector<CodePointRange> merged;
  for (const CodePointRange& r : clipped) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

std::vector<CodePointRange> complement_ranges(const std::vector<CodePointRange>& ranges) {
  std::vector<CodePointRange> out;
  uint32_t next = 0;
  for (const CodePointRange& r : ranges) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalize_ranges(std::move(out));
}

std::vector<std::vector<ByteRange>> utf8_sequences(const std::vector<CodePointRange>& ranges) {
  static constexpr uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  std::vector<std::vector<ByteRange>> out;
  for (const CodePointRange& r : ranges) {
    uint32_t lo = r.lo;
    for (uint32_t end : kLengthEnds) {
      if (lo > r.hi) break;
      if (lo > end) continue;
      const uint32_t hi = std::min(r.hi, end);
      emit_same_length(lo, hi, out);
      lo = hi + 1;
    }
  }
  return out;
}

bool decode_utf8(const std::string& text, size_t& i, uint32_t& cp) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t b0 = byte(i);
  size_t n;
  uint32_t min;
  if (b0 < 0x80) {
    cp = b0;
    ++i;
    return true;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return false;
  }
  if (i + n > text.size()) return false;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  i += n;
  return true;
}

}  // namespace cadenza::grammar
