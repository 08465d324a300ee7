// Llama 3.1 - 3.3 calls. The templates ask for a bare JSON object
// {"name": .., "parameters": {..}} as the whole reply; the models also write <|python_tag|>{..},
// and for builtin tools (brave_search, wolfram_alpha) <|python_tag|>NAME.call(k="v", ..), the
// syntax Llama 3.1's template renders them with: string values in double quotes (numbers and
// booleans bare are read as JSON).
// Several calls may be separated by ";". A bare object is a call only at the very start of the
// output (elsewhere it is more likely an answer that contains JSON), and only when it has the
// call's shape; otherwise it is content.
#include <cctype>

#include <nlohmann/json.hpp>

#include "toolcall/scan.h"

namespace cadenza::toolcall::detail {

namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";
// End-of-message tokens; usually stop tokens the engine strips, consumed when present.
constexpr std::string_view kEom = "<|eom_id|>";
constexpr std::string_view kEot = "<|eot_id|>";

// One or more call objects from text[start] (a '{'), separated by ';'.
Block parse_json_calls(std::string_view text, size_t start, bool final) {
  Block block = Block::incomplete();
  size_t pos = start;
  size_t last_end = start;
  while (true) {
    const JsonExtent e = json_extent(text, pos);
    if (e.status == JsonExtent::Status::kIncomplete) return Block::incomplete();
    std::optional<RawCall> call;
    if (e.status == JsonExtent::Status::kComplete) call = call_from_object_text(text.substr(pos, e.end - pos));
    if (!call) {
      if (block.calls.empty()) return Block::invalid(e.end);
      break;  // the calls so far stand; the rest is text
    }
    block.calls.push_back(std::move(*call));
    last_end = e.end;
    size_t q = skip_space(text, e.end);
    if (!final && (q == text.size() || is_partial_at(text, q, kEom) || is_partial_at(text, q, kEot))) {
      return Block::incomplete();  // a ';' and another call may follow
    }
    if (starts_with_at(text, q, kEom) || starts_with_at(text, q, kEot)) {
      last_end = q + kEom.size();  // both markers have the same length
      break;
    }
    if (q < text.size() && text[q] == ';') {
      const size_t r = skip_space(text, q + 1);
      if (!final && r == text.size()) return Block::incomplete();
      last_end = q + 1;
      if (r < text.size() && text[r] == '{') {
        pos = r;
        continue;
      }
    }
    break;
  }
  block.status = Block::Status::kComplete;
  block.end = last_end;
  return block;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// NAME.call(k="v", k2=3) from text[p]; the call ends at its ')'.
Block parse_builtin_call(std::string_view text, size_t p) {
  constexpr std::string_view kCall = ".call(";
  size_t q = p;
  while (q < text.size() && ident_char(text[q])) ++q;
  if (q == text.size()) return Block::incomplete();
  if (q == p) return Block::invalid(p + 1);
  for (size_t i = 0; i < kCall.size(); ++i) {
    if (q + i == text.size()) return Block::incomplete();
    if (text[q + i] != kCall[i]) return Block::invalid(q + i + 1);
  }
  RawCall call;
  call.name = std::string(text.substr(p, q - p));
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  size_t i = skip_space(text, q + kCall.size());
  while (true) {
    if (i >= text.size()) return Block::incomplete();
    if (text[i] == ')') break;
    size_t k = i;
    while (k < text.size() && ident_char(text[k])) ++k;
    if (k == text.size()) return Block::incomplete();
    if (k == i || text[k] != '=') return Block::invalid(k + 1);
    const std::string key(text.substr(i, k - i));
    size_t v = k + 1;
    if (v == text.size()) return Block::incomplete();
    if (text[v] == '"') {
      std::string value;
      size_t j = v + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size()) ++j;
        value += text[j];
      }
      if (j >= text.size()) return Block::incomplete();
      args[key] = value;
      i = j + 1;
    } else {
      size_t j = v;
      while (j < text.size() && text[j] != ',' && text[j] != ')') ++j;
      if (j == text.size()) return Block::incomplete();
      auto parsed = nlohmann::ordered_json::parse(trim(text.substr(v, j - v)), nullptr, false);
      if (parsed.is_discarded() || parsed.is_object() || parsed.is_array()) return Block::invalid(j + 1);
      args[key] = parsed;
      i = j;
    }
    i = skip_space(text, i);
    if (i < text.size() && text[i] == ',') i = skip_space(text, i + 1);
  }
  call.arguments = args.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return Block::complete(i + 1, std::move(call));
}

Block parse_python_tag_block(std::string_view text, size_t marker_pos, bool final) {
  const size_t p = skip_space(text, marker_pos + kPythonTag.size());
  if (p == text.size()) return Block::incomplete();
  if (text[p] != '{') {
    Block b = parse_builtin_call(text, p);
    if (b.status != Block::Status::kComplete) return b;
    // Consume an end-of-message token right after it.
    const size_t q = skip_space(text, b.end);
    if (!final && (q == text.size() || is_partial_at(text, q, kEom) || is_partial_at(text, q, kEot))) {
      return Block::incomplete();
    }
    if (starts_with_at(text, q, kEom) || starts_with_at(text, q, kEot)) b.end = q + kEom.size();
    return b;
  }
  return parse_json_calls(text, p, final);
}

}  // namespace

void scan_llama3(std::string_view text, bool final, Sink& sink) {
  size_t pos = 0;
  const size_t p = skip_space(text, 0);
  if (!final && p == text.size()) return;  // nothing but whitespace yet
  if (p < text.size() && text[p] == '{') {
    Block b = parse_json_calls(text, p, final);
    if (b.status == Block::Status::kIncomplete) {
      if (!final) return;
      b = Block::invalid(text.size());
    }
    if (b.status == Block::Status::kComplete) {
      for (auto& c : b.calls) sink.call(std::move(c));
    } else {
      sink.text(text.substr(0, b.end));
    }
    pos = b.end;
  }
  scan_blocks(text, pos, final, {kPythonTag}, parse_python_tag_block, sink);
}

}  // namespace cadenza::toolcall::detail
