// Kimi-K2 calls:
//   <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{..}<|tool_call_end|>...<|tool_calls_section_end|>
// The model writes the call's id itself (functions.NAME:IDX, which its template renders back as
// the id), so it is kept as the id and the name is what lies between "functions." and ":".
#include "toolcall/families/sectioned.h"

namespace cadenza::toolcall::detail {

namespace {

constexpr SectionMarkers kMarkers{"<|tool_calls_section_begin|>", "<|tool_call_begin|>",
                                  "<|tool_call_end|>", "<|tool_calls_section_end|>"};
constexpr std::string_view kArgs = "<|tool_call_argument_begin|>";

std::optional<RawCall> parse_inner(std::string_view inner) {
  const size_t args = inner.find(kArgs);
  if (args == std::string_view::npos) return std::nullopt;
  std::string_view id = trim(inner.substr(0, args));
  std::string_view name = id;
  if (name.starts_with("functions.")) name.remove_prefix(10);
  if (const size_t colon = name.rfind(':'); colon != std::string_view::npos) name = name.substr(0, colon);
  if (name.empty() || name.find_first_of(" \n\t<>{}") != std::string_view::npos) return std::nullopt;
  auto arguments = normalize_object(trim(inner.substr(args + kArgs.size())));
  if (!arguments) return std::nullopt;
  return RawCall{std::string(name), std::move(*arguments), std::string(id)};
}

Block parse_kimi_block(std::string_view text, size_t marker_pos, bool final) {
  return parse_section(text, marker_pos, final, kMarkers, parse_inner);
}

}  // namespace

void scan_kimi_k2(std::string_view text, bool final, Sink& sink) {
  scan_blocks(text, 0, final, {kMarkers.section_begin}, parse_kimi_block, sink);
}

}  // namespace cadenza::toolcall::detail
