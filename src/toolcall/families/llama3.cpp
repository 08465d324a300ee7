// Llama 3.1 - 3.3 calls. The templates ask for a bare JSON object
// {"name": .., "parameters": {..}} as the whole reply; the models also write <|python_tag|>{..}
// (and, with builtin tools, <|python_tag|>NAME.call(..), which is not parsed: it stays content).
// Several calls may be separated by ";". A bare object is a call only at the very start of the
// output (elsewhere it is more likely an answer that contains JSON), and only when it has the
// call's shape; otherwise it is content.
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

Block parse_python_tag_block(std::string_view text, size_t marker_pos, bool final) {
  const size_t p = skip_space(text, marker_pos + kPythonTag.size());
  if (p == text.size()) return Block::incomplete();
  if (text[p] != '{') return Block::invalid(p + 1);
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
