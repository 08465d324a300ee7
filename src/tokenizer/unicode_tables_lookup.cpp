// Lookups over the generated tables of unicode_tables.cpp (binary searches over sorted arrays).
#include <algorithm>

#include "tokenizer/unicode_bytes.h"
#include "tokenizer/unicode_tables.h"

namespace cadenza::tok {

namespace {

using namespace unicode_tables;

uint8_t category_class(uint32_t cp) {
  if (cp >= 0x110000) return 1;
  const CategoryRange* end = kCategoryRanges + kCategoryRangeCount;
  const CategoryRange* it = std::upper_bound(
      kCategoryRanges, end, cp, [](uint32_t c, const CategoryRange& r) { return c < r.first; });
  if (it == kCategoryRanges) return 0;
  --it;
  return cp <= it->last ? it->cls : 0;
}

// Hangul syllables decompose algorithmically (Unicode 3.12): L V or L V T conjoining jamo.
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kVCount = 21, kTCount = 28, kSCount = 19 * kVCount * kTCount;

}  // namespace

bool is_other_category(uint32_t cp) { return category_class(cp) == 1; }
bool is_punctuation_category(uint32_t cp) { return category_class(cp) == 2; }
bool is_nonspacing_mark(uint32_t cp) { return category_class(cp) == 3; }

bool is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

void append_lowercase(uint32_t cp, std::string& out) {
  if (cp == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE: "i" + COMBINING DOT ABOVE
    out += "i\xCC\x87";
    return;
  }
  const LowerRun* end = kLowerRuns + kLowerRunCount;
  const LowerRun* it = std::upper_bound(
      kLowerRuns, end, cp, [](uint32_t c, const LowerRun& r) { return c < r.first; });
  if (it != kLowerRuns) {
    --it;
    if (cp <= it->last && (cp - it->first) % it->stride == 0) {
      append_utf8(out, static_cast<uint32_t>(static_cast<int64_t>(cp) + it->delta));
      return;
    }
  }
  append_utf8(out, cp);
}

void append_stripped_accents(uint32_t cp, std::string& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    append_utf8(out, kLBase + s / (kVCount * kTCount));
    append_utf8(out, kVBase + (s % (kVCount * kTCount)) / kTCount);
    if (s % kTCount != 0) append_utf8(out, kTBase + s % kTCount);
    return;
  }
  if (is_nonspacing_mark(cp)) return;
  const StripSingle* send = kStripSingle + kStripSingleCount;
  const StripSingle* s = std::lower_bound(
      kStripSingle, send, cp, [](const StripSingle& e, uint32_t c) { return e.cp < c; });
  if (s != send && s->cp == cp) {
    if (s->to != 0xFFFFFFFFu) append_utf8(out, s->to);
    return;
  }
  const StripMulti* mend = kStripMulti + kStripMultiCount;
  const StripMulti* m = std::lower_bound(
      kStripMulti, mend, cp, [](const StripMulti& e, uint32_t c) { return e.cp < c; });
  if (m != mend && m->cp == cp) {
    for (uint32_t to : m->to) {
      if (to != 0) append_utf8(out, to);
    }
    return;
  }
  append_utf8(out, cp);
}

}  // namespace cadenza::tok
