// StreamingToolParser: parse_output for text that arrives in pieces (one per detokenized step).
//
// feed() returns the events the new text settles, finish() those of the end of the output. Events
// are OpenAI-shaped deltas: content, reasoning, the start of a tool call (index, id, name) and
// fragments of its arguments. Guarantees (tests/toolcall checks them at every split point):
//   - the content (reasoning) events concatenate to parse_output's content (reasoning_content)
//     for the whole text, and the calls are parse_output's, in order, same ids;
//   - no marker text reaches content while it could still be the start of a marker: an ambiguous
//     tail is held until the next delta decides it (or finish() makes it text);
//   - a call is announced only once it is complete and valid (its end marker arrived, or for
//     formats without one its JSON closed), so a truncated or malformed call never leaves a
//     half-streamed call behind: it becomes content, as in parse_output. The price: arguments
//     come as one fragment when the call completes, not token by token.
// How: every feed rescans the whole text so far (scan.h) and emits what grew; O(length) per
// feed, microseconds for typical replies.
// Not thread-safe: one parser per output stream.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "toolcall/tool_call.h"

namespace cadenza::toolcall {

struct OutputDelta {
  enum class Kind {
    kContent,            // text: a content fragment
    kReasoning,          // text: a reasoning_content fragment
    kToolCallStart,      // index, id, name: a new call (OpenAI: tool_calls[index] with id, name)
    kToolCallArguments,  // index, text: a fragment of that call's arguments
  };
  Kind kind = Kind::kContent;
  std::string text;
  size_t index = 0;
  std::string id, name;
  bool operator==(const OutputDelta&) const = default;
};

class StreamingToolParser {
 public:
  explicit StreamingToolParser(ToolCallFormat format, ParseOptions options = {});

  // The events `delta` settles. Calls after finish() return nothing.
  std::vector<OutputDelta> feed(std::string_view delta);
  // The events of the end of the output (held tails become text, open calls content).
  std::vector<OutputDelta> finish();

  // False if a rescan ever contradicted what was already emitted (a bug in a family scanner;
  // the parser then keeps the emitted text and continues). For tests.
  bool consistent() const { return consistent_; }
  // Everything emitted so far, as parse_output's shape.
  const ParsedOutput& emitted() const { return emitted_; }

 private:
  std::vector<OutputDelta> emit(bool final);

  ToolCallFormat format_;
  ParseOptions options_;
  std::string text_;
  ParsedOutput emitted_;
  bool finished_ = false;
  bool consistent_ = true;
};

}  // namespace cadenza::toolcall
