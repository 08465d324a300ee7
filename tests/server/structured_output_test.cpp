// parse_structured_output: the request fields that constrain the output and the tool fields.
#include "server/structured_output.h"

#include <gtest/gtest.h>

#include "grammar/matcher.h"
#include "server/output_grammar.h"

namespace cadenza::server {
namespace {

using json = nlohmann::ordered_json;
using Kind = OutputConstraint::Kind;

json chat_body(json extra) {
  json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

json weather_tool(const std::string& name = "get_weather") {
  return {{"type", "function"},
          {"function",
           {{"name", name},
            {"parameters",
             {{"type", "object"},
              {"properties", {{"city", {{"type", "string"}}}}},
              {"required", {"city"}}}}}}};
}

TEST(StructuredOutput, NothingAsked) {
  StructuredOutput so;
  ASSERT_FALSE(parse_structured_output(chat_body(json::object()), Endpoint::kChat, so));
  EXPECT_EQ(so.constraint.kind, Kind::kNone);
  EXPECT_FALSE(so.tools.calls_possible());
  ASSERT_FALSE(parse_structured_output(chat_body({{"response_format", {{"type", "text"}}}}),
                                       Endpoint::kChat, so));
  EXPECT_EQ(so.constraint.kind, Kind::kNone);
}

TEST(StructuredOutput, ResponseFormats) {
  StructuredOutput so;
  ASSERT_FALSE(parse_structured_output(chat_body({{"response_format", {{"type", "json_object"}}}}),
                                       Endpoint::kChat, so));
  EXPECT_EQ(so.constraint.kind, Kind::kJsonObject);
  const json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
  ASSERT_FALSE(parse_structured_output(
      chat_body({{"response_format",
                  {{"type", "json_schema"},
                   {"json_schema", {{"name", "x"}, {"schema", schema}, {"strict", true}}}}}}),
      Endpoint::kChat, so));
  EXPECT_EQ(so.constraint.kind, Kind::kJsonSchema);
  EXPECT_EQ(so.constraint.schema, schema);
  EXPECT_TRUE(so.constraint.strict);
  EXPECT_EQ(so.constraint.field, "response_format");
  // strict is opt-in, as OpenAI has it.
  ASSERT_FALSE(parse_structured_output(
      chat_body({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}}}}),
      Endpoint::kChat, so));
  EXPECT_FALSE(so.constraint.strict);
}

TEST(StructuredOutput, ExtensionFields) {
  StructuredOutput so;
  ASSERT_FALSE(parse_structured_output({{"prompt", "x"}, {"grammar", "root ::= \"a\""}},
                                       Endpoint::kCompletions, so));
  EXPECT_EQ(so.constraint.kind, Kind::kGrammar);
  EXPECT_EQ(so.constraint.text, "root ::= \"a\"");
  ASSERT_FALSE(parse_structured_output({{"prompt", "x"}, {"guided_regex", "[0-9]+"}},
                                       Endpoint::kCompletions, so));
  EXPECT_EQ(so.constraint.kind, Kind::kRegex);
  ASSERT_FALSE(parse_structured_output({{"prompt", "x"}, {"guided_json", "{\"type\":\"string\"}"}},
                                       Endpoint::kCompletions, so));
  EXPECT_EQ(so.constraint.kind, Kind::kJsonSchema);
  EXPECT_EQ(so.constraint.schema, json({{"type", "string"}}));
  ASSERT_FALSE(parse_structured_output({{"prompt", "x"}, {"guided_choice", {"yes", "no"}}},
                                       Endpoint::kCompletions, so));
  EXPECT_EQ(so.constraint.kind, Kind::kChoice);
  EXPECT_EQ(so.constraint.choices, (std::vector<std::string>{"yes", "no"}));
  ASSERT_FALSE(parse_structured_output(
      {{"prompt", "x"}, {"structured_outputs", {{"regex", "a|b"}}}}, Endpoint::kCompletions, so));
  EXPECT_EQ(so.constraint.kind, Kind::kRegex);
  EXPECT_EQ(so.constraint.field, "structured_outputs.regex");
}

TEST(StructuredOutput, BadConstraintsAreNamed400s) {
  StructuredOutput so;
  auto e = parse_structured_output(chat_body({{"response_format", {{"type", "yaml"}}}}),
                                   Endpoint::kChat, so);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->param, "response_format");
  e = parse_structured_output(chat_body({{"response_format", {{"type", "json_schema"}}}}),
                              Endpoint::kChat, so);
  ASSERT_TRUE(e);
  e = parse_structured_output(
      chat_body({{"response_format", {{"type", "json_object"}}}, {"grammar", "root ::= \"a\""}}),
      Endpoint::kChat, so);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("send one"), std::string::npos) << e->message;
  e = parse_structured_output({{"prompt", "x"}, {"guided_choice", json::array()}},
                              Endpoint::kCompletions, so);
  ASSERT_TRUE(e);
  e = parse_structured_output({{"prompt", "x"}, {"guided_json", "{not json"}},
                              Endpoint::kCompletions, so);
  ASSERT_TRUE(e);
  e = parse_structured_output({{"prompt", "x"}, {"structured_outputs", {{"xml", "a"}}}},
                              Endpoint::kCompletions, so);
  ASSERT_TRUE(e);
  e = parse_structured_output({{"prompt", "x"}, {"tools", json::array({weather_tool()})}},
                              Endpoint::kCompletions, so);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools");
}

TEST(StructuredOutput, Tools) {
  StructuredOutput so;
  ASSERT_FALSE(parse_structured_output(chat_body({{"tools", json::array({weather_tool()})}}),
                                       Endpoint::kChat, so));
  ASSERT_EQ(so.tools.functions.size(), 1u);
  EXPECT_EQ(so.tools.functions[0].name, "get_weather");
  EXPECT_EQ(so.tools.choice, ToolRequest::Choice::kAuto);
  EXPECT_TRUE(so.tools.calls_possible());
  EXPECT_FALSE(so.tools.constrained());
  EXPECT_TRUE(so.tools.parallel);

  ASSERT_FALSE(parse_structured_output(
      chat_body({{"tools", json::array({weather_tool(), weather_tool("other")})},
                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "other"}}}}},
                 {"parallel_tool_calls", false}}),
      Endpoint::kChat, so));
  EXPECT_EQ(so.tools.choice, ToolRequest::Choice::kNamed);
  EXPECT_EQ(so.tools.named, "other");
  EXPECT_TRUE(so.tools.constrained());
  EXPECT_FALSE(so.tools.parallel);

  ASSERT_FALSE(parse_structured_output(
      chat_body({{"tools", json::array({weather_tool()})}, {"tool_choice", "none"}}),
      Endpoint::kChat, so));
  EXPECT_FALSE(so.tools.calls_possible());

  // Parameters absent: any object.
  ASSERT_FALSE(parse_structured_output(
      chat_body({{"tools", json::array({{{"type", "function"}, {"function", {{"name", "now"}}}}})},
                 {"tool_choice", "required"}}),
      Endpoint::kChat, so));
  EXPECT_EQ(so.tools.functions[0].parameters, json({{"type", "object"}}));
}

TEST(StructuredOutput, BadToolsAreNamed400s) {
  StructuredOutput so;
  const std::vector<json> bad = {
      chat_body({{"tools", "x"}}),
      chat_body({{"tools", json::array({{{"type", "code"}}})}}),
      chat_body({{"tools", json::array({{{"type", "function"}, {"function", {{"name", "a b"}}}}})}}),
      chat_body({{"tools", json::array({weather_tool(), weather_tool()})}}),
      chat_body({{"tools", json::array({{{"type", "function"},
                                         {"function", {{"name", "f"}, {"parameters", 3}}}}})}}),
      chat_body({{"tools", json::array({weather_tool()})}, {"tool_choice", "sometimes"}}),
      chat_body({{"tools", json::array({weather_tool()})},
                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}),
      chat_body({{"tool_choice", "required"}}),
      chat_body({{"tools", json::array({weather_tool()})}, {"parallel_tool_calls", "yes"}}),
      chat_body({{"tools", json::array({weather_tool()})},
                 {"tool_choice", "required"},
                 {"response_format", {{"type", "json_object"}}}}),
  };
  for (const json& body : bad) {
    auto e = parse_structured_output(body, Endpoint::kChat, so);
    ASSERT_TRUE(e) << body.dump();
    EXPECT_EQ(e->status, 400);
    EXPECT_FALSE(e->param.empty()) << body.dump();
  }
}

}  // namespace
}  // namespace cadenza::server

namespace cadenza::server {
namespace {

// Constrained calls of a family whose markers are control tokens (Mistral v11 here): the grammar
// names the tokens by id, so the matcher takes [TOOL_CALLS] as that one token and never as its
// spelled-out text (which would detokenize the same but is not what the model was trained on).
TEST(OutputGrammar, ControlTokenMarkersAreTokenTerminals) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  const int32_t tool_calls = 256, args = 257, eos = 258;
  bytes.push_back("[TOOL_CALLS]");
  bytes.push_back("[ARGS]");
  bytes.push_back("</s>");
  std::vector<uint8_t> special(bytes.size(), 0);
  special[tool_calls] = special[args] = special[eos] = 1;
  auto index = grammar::TokenIndex::build(bytes, special, {eos}, bytes);

  StructuredOutput so;
  ASSERT_FALSE(parse_structured_output(
      {{"messages", {{{"role", "user"}, {"content", "x"}}}},
       {"tools", json::array({{{"type", "function"},
                               {"function", {{"name", "f"},
                                             {"parameters", {{"type", "object"},
                                                             {"properties", {{"a", {{"type", "boolean"}}}}},
                                                             {"required", {"a"}},
                                                             {"additionalProperties", false}}}}}}})},
       {"tool_choice", "required"}, {"parallel_tool_calls", false}},
      Endpoint::kChat, so));
  const toolcall::SpecialTokenLookup lookup = [&](std::string_view text) -> std::optional<int32_t> {
    if (text == "[TOOL_CALLS]") return tool_calls;
    if (text == "[ARGS]") return args;
    return std::nullopt;
  };
  auto gbnf = output_gbnf(so, toolcall::ToolCallFormat::kMistralV11, lookup);
  ASSERT_TRUE(std::holds_alternative<std::string>(gbnf));
  auto compiled = grammar::compile_gbnf(std::get<std::string>(gbnf), index);
  ASSERT_TRUE(compiled.ok()) << compiled.error() << "\n" << std::get<std::string>(gbnf);

  grammar::GrammarMatcher spelled(*compiled);
  EXPECT_FALSE(spelled.accept_bytes("[TOOL_CALLS]"));  // the text is not the token
  grammar::GrammarMatcher m(*compiled);
  ASSERT_TRUE(m.accept_token(tool_calls));
  ASSERT_TRUE(m.accept_bytes("f"));
  ASSERT_TRUE(m.accept_token(args));
  ASSERT_TRUE(m.accept_bytes("{\"a\": true}"));
  EXPECT_TRUE(m.can_end());
}

}  // namespace
}  // namespace cadenza::server
