// Formats whose calls sit in a section of special tokens (DeepSeek V3/R1/V3.1, Kimi-K2):
//   SECTION_BEGIN (ws CALL_BEGIN inner CALL_END)+ ws SECTION_END
// The inner text of each call is the family's (inner_parser). Lenient where the section end is
// missing (some quantized models stop right after the last call): the section then ends at the
// end of a final text or at the first byte that starts no call.
#pragma once

#include "toolcall/scan.h"

namespace cadenza::toolcall::detail {

struct SectionMarkers {
  std::string_view section_begin, call_begin, call_end, section_end;
};
using InnerParser = std::optional<RawCall> (*)(std::string_view inner);

Block parse_section(std::string_view text, size_t marker_pos, bool final,
                    const SectionMarkers& markers, InnerParser inner_parser);

}  // namespace cadenza::toolcall::detail
