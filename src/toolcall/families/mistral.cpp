// Mistral calls, both generations (one parser; the format enum only picks the grammar):
//   before v11: [TOOL_CALLS][{"name": .., "arguments": {..}, "id": ..}, ..]
//   v11+:       [TOOL_CALLS]NAME[ARGS]{..}  or  [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{..}, repeated
// No end marker: a call ends where its JSON ends (the JSON extent scanner finds it).
#include <cctype>

#include <nlohmann/json.hpp>

#include "toolcall/scan.h"

namespace cadenza::toolcall::detail {

namespace {

constexpr std::string_view kOpen = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";
constexpr std::string_view kCallId = "[CALL_ID]";

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

Block parse_array(std::string_view text, size_t p) {
  const JsonExtent e = json_extent(text, p);
  if (e.status == JsonExtent::Status::kIncomplete) return Block::incomplete();
  if (e.status == JsonExtent::Status::kInvalid) return Block::invalid(e.end);
  auto arr = nlohmann::ordered_json::parse(text.substr(p, e.end - p), nullptr, false);
  Block block = Block::invalid(e.end);
  if (!arr.is_array() || arr.empty()) return block;
  for (const auto& item : arr) {
    auto call = call_from_object_text(item.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    if (!call) return Block::invalid(e.end);
    block.calls.push_back(std::move(*call));
  }
  block.status = Block::Status::kComplete;
  return block;
}

Block parse_mistral_block(std::string_view text, size_t marker_pos, bool final) {
  const size_t p = skip_space(text, marker_pos + kOpen.size());
  if (p == text.size()) return Block::incomplete();
  if (text[p] == '[') return parse_array(text, p);
  size_t q = p;
  while (q < text.size() && name_char(text[q])) ++q;
  if (q == p) return Block::invalid(p + 1);
  if (q == text.size()) return Block::incomplete();
  RawCall call;
  call.name = std::string(text.substr(p, q - p));
  if (starts_with_at(text, q, kCallId)) {
    const size_t id_start = q + kCallId.size();
    const size_t args = text.find(kArgs, id_start);
    if (args == std::string_view::npos) return Block::incomplete();
    call.id = std::string(trim(text.substr(id_start, args - id_start)));
    q = args;
  }
  if (starts_with_at(text, q, kArgs)) {
    q += kArgs.size();
  } else if (is_partial_at(text, q, kArgs) || is_partial_at(text, q, kCallId)) {
    return Block::incomplete();
  }
  const size_t j = skip_space(text, q);
  if (j == text.size()) return Block::incomplete();
  if (text[j] != '{') return Block::invalid(j + 1);
  const JsonExtent e = json_extent(text, j);
  if (e.status == JsonExtent::Status::kIncomplete) return Block::incomplete();
  if (e.status == JsonExtent::Status::kInvalid) return Block::invalid(e.end);
  auto args = normalize_object(text.substr(j, e.end - j));
  if (!args) return Block::invalid(e.end);
  call.arguments = std::move(*args);
  return Block::complete(e.end, std::move(call));
}

}  // namespace

void scan_mistral(std::string_view text, bool final, Sink& sink) {
  scan_blocks(text, 0, final, {kOpen}, parse_mistral_block, sink);
}

}  // namespace cadenza::toolcall::detail
