// Hermes-style calls (Hermes 2/3, Qwen 2.5, Qwen 3, QwQ): each call is one JSON object
// {"name": .., "arguments": {..}} between <tool_call> and </tool_call>, any number of them,
// anywhere in the text. The block ends only at </tool_call>: until then it is held.
#include "toolcall/scan.h"

namespace cadenza::toolcall::detail {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

Block parse_hermes_block(std::string_view text, size_t marker_pos, bool final) {
  const size_t body = marker_pos + kOpen.size();
  const size_t close = text.find(kClose, body);
  if (close == std::string_view::npos) return Block::incomplete();
  const size_t end = close + kClose.size();
  auto call = call_from_object_text(trim(text.substr(body, close - body)));
  if (!call) return Block::invalid(end);
  return Block::complete(end, std::move(*call));
}

}  // namespace

void scan_hermes(std::string_view text, bool final, Sink& sink) {
  scan_blocks(text, 0, final, {kOpen}, parse_hermes_block, sink);
}

}  // namespace cadenza::toolcall::detail
