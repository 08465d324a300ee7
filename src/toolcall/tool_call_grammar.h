// The call syntax of each format as GBNF, for constrained tool calls (tool_choice "required" or a
// named function): the caller has rules for each tool's arguments JSON object (from its parameter
// schema) and gets the rules that wrap them in the family's markers.
//
// Output: a `root` rule and helper rules named `tc-...`; the caller appends its arguments rules
// (and whatever they refer to). Tool names are written as the literal text of the call, JSON- and
// GBNF-escaped. The layout (newlines, spaces) is the one the family's chat template renders, so
// that the constrained text looks like what the model was trained on.
//
// Markers: a marker that is a control token of the family's vocabulary is written as a token
// terminal (`<|channel|>`: the token whose text is exactly that), one that is ordinary text (or an
// added token detokenized as text) as a string literal. Per family (README.md has the reasons):
//   hermes, glm45, deepseek_v3/_v31, llama3 (bare JSON form), mistral/_v11: string literals
//   kimi_k2, gpt_oss: token terminals
// Mistral's [TOOL_CALLS] and [ARGS] are control tokens, but their text has no angle brackets and
// so cannot be a `<...>` terminal; they are literals, which a matcher that compares token text
// accepts (see README.md: unverified against src/grammar).
// glm45: arguments are XML key/value pairs, not a JSON object, so `arguments_rule` is not used:
// the grammar fixes the name and the pair structure, the keys and values are free text.
//
// required: the root is the calls alone; otherwise root is `tc-calls | tc-text` (free text), which
// constrains nothing useful: for tool_choice "auto" apply no grammar, or start it at the marker.
// parallel: one or more calls, else exactly one. `tools` must not be empty (an empty list gives a
// grammar whose root is free text).
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <vector>

#include "toolcall/tool_call.h"

namespace cadenza::toolcall {

struct ToolGrammarEntry {
  std::string name;            // the function's name
  std::string arguments_rule;  // the name of a GBNF rule (defined by the caller) for its arguments
};

std::string tool_call_gbnf(ToolCallFormat format, const std::vector<ToolGrammarEntry>& tools,
                           bool parallel, bool required);

}  // namespace cadenza::toolcall
