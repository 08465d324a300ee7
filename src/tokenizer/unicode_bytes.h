// UTF-8 helpers and the GPT-2 byte <-> unicode mapping used by byte-level BPE vocabularies.
//
// Byte-level BPE vocabularies (tokenizer.ggml.model "gpt2") store every token as a string of
// printable stand-in characters, one per byte: bytes that are printable Latin-1 stand for
// themselves, the other 68 bytes (controls, space, DEL, NBSP, soft hyphen...) are shifted to
// U+0100..U+0143 so that no token text contains whitespace or control characters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/utf8.h"

namespace cadenza::tok {

using cadenza::append_utf8;

// The outcome of examining the bytes at the start of a buffer (strict UTF-8, Unicode table 3-7:
// no overlongs, no surrogates, nothing above U+10FFFF).
struct Utf8Check {
  enum Kind { kComplete, kIncomplete, kInvalid };
  Kind kind;
  // kComplete: the sequence length. kInvalid: the length of the maximal subpart to replace with
  // one U+FFFD (>= 1). kIncomplete: the number of bytes present (all a valid prefix).
  size_t length;
};
// Precondition: !s.empty().
Utf8Check check_utf8(std::string_view s);

// Decodes the code point at the start of `s` (non-empty). Returns false for an invalid or
// truncated sequence; `length` is then 1 so callers can skip one byte.
bool decode_utf8(std::string_view s, uint32_t& cp, size_t& length);

// The stand-in character of byte `b`, UTF-8 encoded (1 or 2 bytes).
std::string_view byte_to_unicode(uint8_t b);

// Raw bytes -> stand-in characters (the form in which byte-level BPE vocabularies store tokens).
std::string bytes_to_unicode(std::string_view raw);

// Stand-in characters -> raw bytes. Characters that are not stand-ins (possible in hostile or
// hand-made vocabularies) are copied through unchanged rather than dropped.
std::string unicode_to_bytes(std::string_view text);

}  // namespace cadenza::tok
