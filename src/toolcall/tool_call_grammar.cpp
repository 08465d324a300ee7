// tool_call_gbnf: per family, the GBNF of one call of each tool, then of the call list
// (tool_call_grammar.h).
#include "toolcall/tool_call_grammar.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "grammar/regex_to_gbnf.h"  // gbnf_literal

namespace cadenza::toolcall {

namespace {

// A GBNF string literal of the text (src/grammar's escaping).
std::string lit(std::string_view text) { return gbnf_literal(text); }

// A marker: the special token's terminal (`<[id]>`) when the vocabulary has the marker as one
// control token, else its text as a literal.
struct Markers {
  const SpecialTokenLookup& special;
  std::string operator()(std::string_view text) const {
    if (special)
      if (std::optional<int32_t> id = special(text)) return fmt::format("<[{}]>", *id);
    return lit(text);
  }
};

// The name as it appears inside a JSON string (quotes not included).
std::string json_escaped(const std::string& name) {
  std::string quoted = nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}

// The body of tc-call-i for one tool.
std::string call_body(ToolCallFormat format, const ToolGrammarEntry& tool, const Markers& m) {
  const std::string& args = tool.arguments_rule;
  switch (format) {
    case ToolCallFormat::kHermes:
      return m("<tool_call>") + " " + lit("\n{\"name\": \"" + json_escaped(tool.name) + "\", \"arguments\": ") +
             " " + args + " " + lit("}\n") + " " + m("</tool_call>");
    case ToolCallFormat::kLlama3:
      return lit("{\"name\": \"" + json_escaped(tool.name) + "\", \"parameters\": ") + " " + args + " " +
             lit("}");
    case ToolCallFormat::kMistral:
      return lit("{\"name\": \"" + json_escaped(tool.name) + "\", \"arguments\": ") + " " + args + " " +
             lit("}");
    case ToolCallFormat::kMistralV11:
      return m("[TOOL_CALLS]") + " " + lit(tool.name) + " " + m("[ARGS]") + " " + args;
    case ToolCallFormat::kDeepSeekV3:
      return m("<｜tool▁call▁begin｜>") + " " + lit("function") + " " + m("<｜tool▁sep｜>") + " " +
             lit(tool.name + "\n```json\n") + " " + args + " " + lit("\n```") + " " +
             m("<｜tool▁call▁end｜>");
    case ToolCallFormat::kDeepSeekV31:
      return m("<｜tool▁call▁begin｜>") + " " + lit(tool.name) + " " + m("<｜tool▁sep｜>") + " " + args +
             " " + m("<｜tool▁call▁end｜>");
    case ToolCallFormat::kKimiK2:
      return m("<|tool_call_begin|>") + " " + lit("functions." + tool.name + ":") + " tc-index " +
             m("<|tool_call_argument_begin|>") + " " + args + " " + m("<|tool_call_end|>");
    case ToolCallFormat::kGlm45:
      return m("<tool_call>") + " " + lit(tool.name) + " tc-glm-arg* " + m("</tool_call>");
    case ToolCallFormat::kGptOss:
      return m("<|channel|>") + " " + lit("commentary to=functions." + tool.name + " ") + " " +
             m("<|constrain|>") + " \"json\" " + m("<|message|>") + " " + args + " " + m("<|call|>");
    case ToolCallFormat::kNone: break;
  }
  return "tc-text";
}

// The call list: (first, repeated-with-separator) per family.
std::string calls_rule(ToolCallFormat format, bool parallel, const Markers& m) {
  switch (format) {
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kGlm45:
      return parallel ? "tc-call (\"\\n\" tc-call)*" : "tc-call";
    case ToolCallFormat::kLlama3:
      return parallel ? "tc-call (\"; \" tc-call)*" : "tc-call";
    case ToolCallFormat::kMistral:
      return m("[TOOL_CALLS]") + " \"[\" tc-call " + (parallel ? "(\", \" tc-call)* " : "") + "\"]\"";
    case ToolCallFormat::kMistralV11:
      return parallel ? "tc-call+" : "tc-call";
    case ToolCallFormat::kDeepSeekV3:
      return m("<｜tool▁calls▁begin｜>") + " tc-call " + (parallel ? "(\"\\n\" tc-call)* " : "") +
             m("<｜tool▁calls▁end｜>");
    case ToolCallFormat::kDeepSeekV31:
      return m("<｜tool▁calls▁begin｜>") + " tc-call" + (parallel ? "+ " : " ") +
             m("<｜tool▁calls▁end｜>");
    case ToolCallFormat::kKimiK2:
      return m("<|tool_calls_section_begin|>") + " tc-call" + (parallel ? "+ " : " ") +
             m("<|tool_calls_section_end|>");
    case ToolCallFormat::kGptOss:
      // An analysis message may come first (the model reasons before it calls); each further call
      // is a new assistant message.
      return std::string("tc-analysis? tc-call") +
             (parallel ? " (" + m("<|start|>") + " \"assistant\" tc-call)*" : "");
    case ToolCallFormat::kNone: break;
  }
  return "tc-text";
}

}  // namespace

std::string tool_call_gbnf(ToolCallFormat format, const std::vector<ToolGrammarEntry>& tools,
                           bool parallel, bool required, const SpecialTokenLookup& special) {
  const Markers m{special};
  std::string out;
  if (tools.empty() || format == ToolCallFormat::kNone) {
    return "root ::= tc-text\ntc-text ::= [^\\x00]*\n";
  }
  out += required ? "root ::= tc-calls\n" : "root ::= tc-calls | tc-text\n";
  out += "tc-calls ::= " + calls_rule(format, parallel, m) + "\n";
  out += "tc-call ::= ";
  for (size_t i = 0; i < tools.size(); ++i) out += fmt::format("{}tc-call-{}", i ? " | " : "", i);
  out += "\n";
  for (size_t i = 0; i < tools.size(); ++i) {
    out += fmt::format("tc-call-{} ::= {}\n", i, call_body(format, tools[i], m));
  }
  if (format == ToolCallFormat::kKimiK2) out += "tc-index ::= [0-9] [0-9]?\n";
  if (format == ToolCallFormat::kGlm45) {
    out += "tc-glm-arg ::= \"\\n<arg_key>\" tc-glm-key \"</arg_key>\\n<arg_value>\" tc-glm-value \"</arg_value>\"\n";
    out += "tc-glm-key ::= [^<\\n]+\n";
    // Any text without "</": values may hold '<' (code, markup) but not a closing tag.
    out += "tc-glm-value ::= ([^<] | \"<\" [^/])*\n";
  }
  if (format == ToolCallFormat::kGptOss) {
    out += "tc-analysis ::= " + m("<|channel|>") + " \"analysis\" " + m("<|message|>") + " tc-text " +
           m("<|end|>") + " " + m("<|start|>") + " \"assistant\"\n";
  }
  out += "tc-text ::= [^\\x00]*\n";
  return out;
}

}  // namespace cadenza::toolcall
