// What a request asks of its output's shape: a constraint (response_format, or one of the
// grammar extensions other servers accept) and tools (tools, tool_choice, parallel_tool_calls).
// Pure parsing and checking over JSON, no grammar compilation: output_grammar.h turns this into
// the GBNF the engine constrains decoding with.
//
// Accepted fields (at most one constraint per request; two are a 400):
//   response_format: {"type": "text"} | {"type": "json_object"} |
//                    {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
//   grammar:         GBNF text (llama-server's field)
//   json_schema:     a schema object (llama-server's field)
//   guided_json / guided_regex / guided_grammar / guided_choice: vLLM's extensions
//   structured_outputs: {"json" | "regex" | "grammar" | "choice": ...} (vLLM's newer spelling)
//   tools:  [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}]
//   tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}}
//   parallel_tool_calls: bool (default true)
// Errors are 400s naming the field, with the path of the problem inside it.
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"

namespace cadenza::server {

struct OutputConstraint {
  enum class Kind { kNone, kJsonObject, kJsonSchema, kGrammar, kRegex, kChoice };
  Kind kind = Kind::kNone;
  nlohmann::ordered_json schema;     // kJsonSchema (declaration order kept: properties come out in it)
  bool strict = true;                // kJsonSchema: OpenAI's strict flag (default true here)
  std::string text;                  // kGrammar: GBNF; kRegex: the expression
  std::vector<std::string> choices;  // kChoice: the output is exactly one of these
  std::string field;                 // the request field it came from (for errors)
};

struct ToolFunction {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON schema of the arguments object ({"type":"object"} if absent)
  bool strict = false;
};

struct ToolRequest {
  enum class Choice { kNone, kAuto, kRequired, kNamed };
  std::vector<ToolFunction> functions;  // empty: the request has no tools
  Choice choice = Choice::kAuto;        // OpenAI's default: auto with tools, none without
  std::string named;                    // kNamed: the function's name
  bool parallel = true;
  bool calls_possible() const { return !functions.empty() && choice != Choice::kNone; }
  bool constrained() const { return choice == Choice::kRequired || choice == Choice::kNamed; }
};

struct StructuredOutput {
  OutputConstraint constraint;
  ToolRequest tools;
};

// Reads the fields above from a completions or chat body into `out`. Tools are chat-only.
// `body` is ordered: a schema's properties are generated in the order the client declared them.
std::optional<ApiError> parse_structured_output(const nlohmann::ordered_json& body,
                                                Endpoint endpoint, StructuredOutput& out);

// Whether `body` has any of the fields above (the router parses the body again, ordered, only
// then).
bool has_structured_output_fields(const nlohmann::json& body);

}  // namespace cadenza::server
