// The machinery every family parser shares (internal to src/toolcall).
//
// A family parser scans the output text from the start and writes what it finds into a Sink:
// runs of plain text (content or reasoning) and completed calls. With `final` false the text may
// still grow, and the parser must write only what no continuation can change: it stops before a
// call whose end has not arrived and holds back a tail that could be the start of a marker. The
// streaming parser relies on this: it rescans the whole text after every delta and emits the
// difference, so "settled" output must only ever grow (README.md, "Streaming").
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "toolcall/tool_call.h"

namespace cadenza::toolcall::detail {

struct RawCall {
  std::string name;
  std::string arguments;  // compact JSON object
  std::string id;         // the model's own id, or empty (a generated one is filled in later)
};

enum class Target { kContent, kReasoning };

// Collects settled output. Text is written into the current run; a run ends at a marker
// (end_run(true): trailing whitespace dropped) or at the end of the output (end_run(false)).
// A run that is only whitespace is dropped entirely. These rules are what make the content of a
// partial scan a prefix of the content of a longer one: trailing whitespace of an open run is not
// settled until a non-space character follows it.
class Sink {
 public:
  // Starts a new run; `lstrip`: drop its leading whitespace; `separator`: written before the run's
  // text when the target already has text and this run turns out non-empty.
  void begin_run(Target target, bool lstrip = false, std::string_view separator = {});
  void text(std::string_view s) { run_ += s; }
  void end_run(bool at_marker);
  void call(RawCall call);
  // Ends the scan: with `final` the open run ends as output ends, else only its settled part
  // (without trailing whitespace) is written.
  void finish(bool final);

  std::string content, reasoning;
  std::vector<RawCall> calls;

 private:
  void flush(bool at_marker);
  std::string run_;
  Target target_ = Target::kContent;
  bool lstrip_ = false;
  std::string separator_;
};

// Where a JSON value that starts at text[start] (after optional whitespace) ends.
struct JsonExtent {
  enum class Status { kComplete, kIncomplete, kInvalid } status;
  size_t end = 0;  // kComplete: one past the value; kInvalid: one past the offending byte
};
JsonExtent json_extent(std::string_view text, size_t start);

// The compact serialization of `json_text` when it is a JSON object, else nullopt.
std::optional<std::string> normalize_object(std::string_view json_text);

// The longest proper prefix of any of `markers` that `text` ends with (0 if none): the tail to
// hold back while more text may come.
size_t partial_marker_tail(std::string_view text, std::initializer_list<std::string_view> markers);

// The earliest occurrence of any of `markers` in text at or after `from`: {position, marker index},
// or nullopt.
struct MarkerHit {
  size_t pos;
  size_t which;
};
std::optional<MarkerHit> find_first(std::string_view text, size_t from,
                                    std::initializer_list<std::string_view> markers);

bool is_space(char c);
std::string_view trim(std::string_view s);
size_t skip_space(std::string_view text, size_t pos);
bool starts_with_at(std::string_view text, size_t pos, std::string_view prefix);
// True when text[pos..] is a proper prefix of `marker` (the text ends inside it).
bool is_partial_at(std::string_view text, size_t pos, std::string_view marker);

// The outcome of parsing one call block that starts at a marker.
struct Block {
  enum class Status { kComplete, kIncomplete, kInvalid } status;
  size_t end = 0;  // kComplete / kInvalid: one past the block
  std::vector<RawCall> calls;

  static Block incomplete() { return Block{Status::kIncomplete, 0, {}}; }
  static Block invalid(size_t end) { return Block{Status::kInvalid, end, {}}; }
  static Block complete(size_t end, RawCall call) {
    Block b{Status::kComplete, end, {}};
    b.calls.push_back(std::move(call));
    return b;
  }
};
using BlockParser = Block (*)(std::string_view text, size_t marker_pos, bool final);

// The loop of the marker-based formats: plain text is content, each `open_markers` hit is parsed
// by `parse_block`; an invalid block is content; an incomplete one ends a non-final scan (and is
// content in a final one). Content runs go to `sink` (the caller has begun the first run).
void scan_blocks(std::string_view text, size_t pos, bool final,
                 std::initializer_list<std::string_view> open_markers, BlockParser parse_block,
                 Sink& sink);

// A call object {"name": .., "arguments"|"parameters": {..} or "<json object>"} as in Hermes,
// Llama 3 and Mistral's array form; nullopt when it is not one. `id` is read when present.
std::optional<RawCall> call_from_object_text(std::string_view json_text);

// The family scanners. Each writes the content after the reasoning prefix (if any) into `sink`,
// which has a content run begun.
void scan_plain(std::string_view text, bool final, Sink& sink);
void scan_hermes(std::string_view text, bool final, Sink& sink);
void scan_llama3(std::string_view text, bool final, Sink& sink);
void scan_mistral(std::string_view text, bool final, Sink& sink);
void scan_deepseek(std::string_view text, bool final, Sink& sink);
void scan_kimi_k2(std::string_view text, bool final, Sink& sink);
void scan_glm45(std::string_view text, bool final, Sink& sink);
// gpt-oss scans the whole output itself (reasoning is a channel, not a prefix).
void scan_gpt_oss(std::string_view text, bool final, Sink& sink);

// The full scan: reasoning prefix, then the family's scanner; ids filled in.
struct ScanResult {
  std::string content, reasoning;
  std::vector<ToolCall> calls;
};
ScanResult scan_output(ToolCallFormat format, std::string_view text, const ParseOptions& options,
                       bool final);

// The id of the index-th call when the model gave none (Mistral: 9 alphanumerics, as its
// templates require; others: "call_" + 24 alphanumerics).
std::string generated_id(ToolCallFormat format, uint64_t seed, size_t index);

}  // namespace cadenza::toolcall::detail
