// GLM-4.5 / 4.6 calls: <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>...</tool_call>.
// A value is JSON when it parses as JSON (numbers, booleans, objects, arrays, quoted strings) and a
// raw string otherwise, which is how the template renders them (tojson for non-strings, strings
// as they are). Ambiguity: a string argument "123" comes back as the number 123; only the schema
// could tell, and the parser does not see it.
#include <nlohmann/json.hpp>

#include "toolcall/scan.h"

namespace cadenza::toolcall::detail {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kKeyOpen = "<arg_key>";
constexpr std::string_view kKeyClose = "</arg_key>";
constexpr std::string_view kValueOpen = "<arg_value>";
constexpr std::string_view kValueClose = "</arg_value>";

std::optional<RawCall> parse_inner(std::string_view inner) {
  // A model that writes the Hermes JSON form inside GLM's markers still means a call.
  if (trim(inner).starts_with("{")) return call_from_object_text(trim(inner));
  size_t pos = inner.find(kKeyOpen);
  RawCall call;
  call.name = std::string(trim(inner.substr(0, pos)));
  if (call.name.empty() || call.name.find_first_of(" \n<>{}") != std::string::npos) return std::nullopt;
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  while (pos != std::string_view::npos) {
    const size_t key_start = pos + kKeyOpen.size();
    const size_t key_end = inner.find(kKeyClose, key_start);
    if (key_end == std::string_view::npos) return std::nullopt;
    const size_t v = skip_space(inner, key_end + kKeyClose.size());
    if (!starts_with_at(inner, v, kValueOpen)) return std::nullopt;
    const size_t value_start = v + kValueOpen.size();
    const size_t value_end = inner.find(kValueClose, value_start);
    if (value_end == std::string_view::npos) return std::nullopt;
    const std::string key(trim(inner.substr(key_start, key_end - key_start)));
    const std::string_view raw = inner.substr(value_start, value_end - value_start);
    auto parsed = nlohmann::ordered_json::parse(raw, nullptr, /*allow_exceptions=*/false);
    args[key] = parsed.is_discarded() ? nlohmann::ordered_json(std::string(raw)) : parsed;
    const size_t next = skip_space(inner, value_end + kValueClose.size());
    if (next == inner.size()) break;
    if (!starts_with_at(inner, next, kKeyOpen)) return std::nullopt;
    pos = next;
  }
  call.arguments = args.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return call;
}

Block parse_glm_block(std::string_view text, size_t marker_pos, bool final) {
  const size_t body = marker_pos + kOpen.size();
  const size_t close = text.find(kClose, body);
  if (close == std::string_view::npos) return Block::incomplete();
  const size_t end = close + kClose.size();
  auto call = parse_inner(text.substr(body, close - body));
  if (!call) return Block::invalid(end);
  return Block::complete(end, std::move(*call));
}

}  // namespace

void scan_glm45(std::string_view text, bool final, Sink& sink) {
  scan_blocks(text, 0, final, {kOpen}, parse_glm_block, sink);
}

}  // namespace cadenza::toolcall::detail
