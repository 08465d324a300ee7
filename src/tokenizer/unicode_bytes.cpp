#include "tokenizer/unicode_bytes.h"

#include <array>

namespace cadenza::tok {

Utf8Check check_utf8(std::string_view s) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) return {Utf8Check::kComplete, 1};
  size_t need = 0;
  // Allowed range of the second byte; later bytes are always 80..BF. These ranges exclude
  // overlong forms (E0, F0), surrogates (ED) and code points above U+10FFFF (F4).
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {Utf8Check::kInvalid, 1};  // continuation byte, C0/C1, F5..FF
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= s.size()) return {Utf8Check::kIncomplete, i};
    const auto b = static_cast<uint8_t>(s[i]);
    const uint8_t l = i == 1 ? lo : 0x80;
    const uint8_t h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) return {Utf8Check::kInvalid, i};
  }
  return {Utf8Check::kComplete, need};
}

bool decode_utf8(std::string_view s, uint32_t& cp, size_t& length) {
  const Utf8Check c = check_utf8(s);
  if (c.kind != Utf8Check::kComplete) {
    length = 1;
    return false;
  }
  length = c.length;
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (length == 1) {
    cp = b0;
    return true;
  }
  cp = b0 & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) cp = (cp << 6) | (static_cast<uint8_t>(s[i]) & 0x3F);
  return true;
}

namespace {

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  // Indexed by code point; only U+0000..U+0143 can be stand-ins. -1: not a stand-in.
  std::array<int16_t, 0x144> to_byte;

  ByteMap() {
    to_byte.fill(-1);
    uint32_t next_shifted = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      // Printable ASCII and printable Latin-1 (minus the soft hyphen) stand for themselves.
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? b : next_shifted++;
      append_utf8(to_unicode[b], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

std::string_view byte_to_unicode(uint8_t b) { return byte_map().to_unicode[b]; }

std::string bytes_to_unicode(std::string_view raw) {
  const ByteMap& m = byte_map();
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) out += m.to_unicode[static_cast<uint8_t>(c)];
  return out;
}

std::string unicode_to_bytes(std::string_view text) {
  const ByteMap& m = byte_map();
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp = 0;
    size_t len = 1;
    const bool ok = decode_utf8(text.substr(i), cp, len);
    if (ok && cp < m.to_byte.size() && m.to_byte[cp] >= 0) {
      out.push_back(static_cast<char>(m.to_byte[cp]));
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

}  // namespace cadenza::tok
