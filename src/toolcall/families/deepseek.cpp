// DeepSeek V3 / R1 (and the R1 distills) and V3.1 calls.
//   V3:   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{..}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
// One parser reads both: a ```json fence after the separator marks V3 (the type comes first).
#include "toolcall/families/sectioned.h"

namespace cadenza::toolcall::detail {

namespace {

constexpr SectionMarkers kMarkers{"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
                                  "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"};
constexpr std::string_view kSep = "<｜tool▁sep｜>";
constexpr std::string_view kFence = "```json";

bool valid_name(std::string_view name) {
  return !name.empty() && name.find_first_of(" \n\t<>{}`") == std::string_view::npos;
}

std::optional<RawCall> parse_inner(std::string_view inner) {
  const size_t sep = inner.find(kSep);
  if (sep == std::string_view::npos) return std::nullopt;
  std::string_view left = trim(inner.substr(0, sep));
  std::string_view right = inner.substr(sep + kSep.size());
  RawCall call;
  const size_t fence = right.find(kFence);
  std::string_view body;
  if (fence != std::string_view::npos) {
    // V3: the left side is the type ("function"), the name is the line before the fence.
    call.name = std::string(trim(right.substr(0, fence)));
    body = right.substr(fence + kFence.size());
    body = trim(body);
    if (!body.ends_with("```")) return std::nullopt;
    body.remove_suffix(3);
  } else {
    call.name = std::string(left);
    body = right;
  }
  if (!valid_name(call.name)) return std::nullopt;
  auto args = normalize_object(trim(body));
  if (!args) return std::nullopt;
  call.arguments = std::move(*args);
  return call;
}

Block parse_deepseek_block(std::string_view text, size_t marker_pos, bool final) {
  return parse_section(text, marker_pos, final, kMarkers, parse_inner);
}

}  // namespace

void scan_deepseek(std::string_view text, bool final, Sink& sink) {
  scan_blocks(text, 0, final, {kMarkers.section_begin}, parse_deepseek_block, sink);
}

}  // namespace cadenza::toolcall::detail
