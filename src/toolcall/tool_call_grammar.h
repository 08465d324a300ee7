// The call syntax of each format as GBNF, for constrained tool calls (tool_choice "required" or a
// named function): the caller has rules for each tool's arguments JSON object (from its parameter
// schema) and gets the rules that wrap them in the family's markers.
//
// Output: a `root` rule and helper rules named `tc-...`; the caller appends its arguments rules
// (and whatever they refer to). Tool names are written as the literal text of the call, JSON- and
// GBNF-escaped. The layout (newlines, spaces) is the one the family's chat template renders, so
// that the constrained text looks like what the model was trained on.
//
// Markers (`<tool_call>`, `[TOOL_CALLS]`, `<｜tool▁sep｜>`, `<|channel|>`, ...): where `special`
// says the vocabulary has the marker as one control token, it is written as that token's id
// terminal (`<[id]>`), so the model emits the token it was trained on (a grammar matcher never
// matches a control token by its text); otherwise (no lookup, an ordinary-text marker such as
// Qwen's `<tool_call>`, an added token that is not control) as a string literal.
// glm45: arguments are XML key/value pairs, not a JSON object, so `arguments_rule` is not used:
// the grammar fixes the name and the pair structure, the keys and values are free text.
//
// required: the root is the calls alone; otherwise root is `tc-calls | tc-text` (free text), which
// constrains nothing useful: for tool_choice "auto" apply no grammar, or start it at the marker.
// parallel: one or more calls, else exactly one. `tools` must not be empty (an empty list gives a
// grammar whose root is free text).
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "toolcall/tool_call.h"

namespace cadenza::toolcall {

struct ToolGrammarEntry {
  std::string name;            // the function's name
  std::string arguments_rule;  // the name of a GBNF rule (defined by the caller) for its arguments
};

// The id of the control token whose text is exactly `text`, if the vocabulary has one.
using SpecialTokenLookup = std::function<std::optional<int32_t>(std::string_view text)>;

std::string tool_call_gbnf(ToolCallFormat format, const std::vector<ToolGrammarEntry>& tools,
                           bool parallel, bool required, const SpecialTokenLookup& special = {});

}  // namespace cadenza::toolcall
