// The section loop shared by DeepSeek and Kimi-K2 (sectioned.h).
#include "toolcall/families/sectioned.h"

namespace cadenza::toolcall::detail {

Block parse_section(std::string_view text, size_t marker_pos, bool final,
                    const SectionMarkers& m, InnerParser inner_parser) {
  Block block = Block::incomplete();
  size_t pos = marker_pos + m.section_begin.size();
  while (true) {
    const size_t p = skip_space(text, pos);
    if (starts_with_at(text, p, m.section_end)) {
      block.end = p + m.section_end.size();
      block.status = block.calls.empty() ? Block::Status::kInvalid : Block::Status::kComplete;
      return block;
    }
    if (starts_with_at(text, p, m.call_begin)) {
      const size_t inner = p + m.call_begin.size();
      const size_t close = text.find(m.call_end, inner);
      if (close == std::string_view::npos) return Block::incomplete();
      auto call = inner_parser(text.substr(inner, close - inner));
      if (!call) return Block::invalid(close + m.call_end.size());
      block.calls.push_back(std::move(*call));
      pos = close + m.call_end.size();
      continue;
    }
    const bool at_end = p == text.size();
    if (!final && (at_end || is_partial_at(text, p, m.section_end) || is_partial_at(text, p, m.call_begin))) {
      return Block::incomplete();
    }
    // Anything else ends a section that has calls (its end marker missing); a section without
    // calls is not one.
    if (block.calls.empty()) return Block::invalid(at_end ? p : p + 1);
    block.status = Block::Status::kComplete;
    block.end = pos;  // the whitespace after the last call stays text (dropped as a blank run)
    return block;
  }
}

}  // namespace cadenza::toolcall::detail
