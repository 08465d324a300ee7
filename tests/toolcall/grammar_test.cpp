// tool_call_gbnf: every rule it refers to is defined (by it or as a caller's arguments rule), the
// markers are token terminals or literals as documented, and names are escaped.
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "toolcall/tool_call_grammar.h"

namespace cadenza::toolcall {
namespace {

const ToolCallFormat kFormats[] = {ToolCallFormat::kHermes, ToolCallFormat::kLlama3, ToolCallFormat::kMistral,
                                   ToolCallFormat::kMistralV11, ToolCallFormat::kDeepSeekV3,
                                   ToolCallFormat::kDeepSeekV31, ToolCallFormat::kKimiK2, ToolCallFormat::kGlm45,
                                   ToolCallFormat::kGptOss};

// Rule name -> body; the rule names a body refers to (outside literals, classes and <tokens>).
std::map<std::string, std::string> rules_of(const std::string& g) {
  std::map<std::string, std::string> rules;
  std::istringstream in(g);
  std::string line;
  while (std::getline(in, line)) {
    const size_t sep = line.find(" ::= ");
    EXPECT_NE(sep, std::string::npos) << line;
    if (sep == std::string::npos) continue;
    EXPECT_TRUE(rules.emplace(line.substr(0, sep), line.substr(sep + 5)).second) << "duplicate " << line;
  }
  return rules;
}

std::set<std::string> references(const std::string& body) {
  std::set<std::string> out;
  size_t i = 0;
  while (i < body.size()) {
    const char c = body[i];
    if (c == '"') {
      for (++i; i < body.size() && body[i] != '"'; ++i) if (body[i] == '\\') ++i;
      ++i;
    } else if (c == '[') {
      for (++i; i < body.size() && body[i] != ']'; ++i) if (body[i] == '\\') ++i;
      ++i;
    } else if (c == '<') {
      i = body.find('>', i) + 1;
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < body.size() && (std::isalnum(static_cast<unsigned char>(body[j])) || body[j] == '-')) ++j;
      out.insert(body.substr(i, j - i));
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

TEST(ToolCallGbnf, EveryReferenceIsDefined) {
  const std::vector<ToolGrammarEntry> tools = {{"get_weather", "args-0"}, {"get_time", "args-1"}};
  for (ToolCallFormat f : kFormats) {
    for (bool parallel : {false, true}) {
      for (bool required : {false, true}) {
        const std::string g = tool_call_gbnf(f, tools, parallel, required);
        auto rules = rules_of(g);
        ASSERT_TRUE(rules.count("root")) << g;
        for (const auto& [name, body] : rules) {
          EXPECT_TRUE(name == "root" || name.starts_with("tc-")) << name;
          for (const auto& ref : references(body)) {
            EXPECT_TRUE(rules.count(ref) || ref == "args-0" || ref == "args-1")
                << tool_call_format_name(f) << ": " << ref << " undefined in\n" << g;
          }
        }
        if (f != ToolCallFormat::kGlm45) {
          EXPECT_NE(g.find("args-0"), std::string::npos) << g;
          EXPECT_NE(g.find("args-1"), std::string::npos) << g;
        }
        EXPECT_EQ(rules["root"], required ? "tc-calls" : "tc-calls | tc-text");
      }
    }
  }
}

TEST(ToolCallGbnf, MarkersPerFamily) {
  const std::vector<ToolGrammarEntry> tools = {{"f", "args"}};
  const std::string hermes = tool_call_gbnf(ToolCallFormat::kHermes, tools, false, true);
  EXPECT_NE(hermes.find(R"("<tool_call>\n{\"name\": \"f\", \"arguments\": " args "}\n</tool_call>")"), std::string::npos) << hermes;
  const std::string kimi = tool_call_gbnf(ToolCallFormat::kKimiK2, tools, true, true);
  EXPECT_NE(kimi.find("<|tool_calls_section_begin|> tc-call+ <|tool_calls_section_end|>"), std::string::npos) << kimi;
  EXPECT_NE(kimi.find("<|tool_call_argument_begin|> args <|tool_call_end|>"), std::string::npos) << kimi;
  const std::string oss = tool_call_gbnf(ToolCallFormat::kGptOss, tools, false, true);
  EXPECT_NE(oss.find("<|channel|> \"commentary to=functions.f \" <|constrain|> \"json\" <|message|> args <|call|>"),
            std::string::npos) << oss;
  const std::string v11 = tool_call_gbnf(ToolCallFormat::kMistralV11, tools, true, true);
  EXPECT_NE(v11.find("\"[TOOL_CALLS]f[ARGS]\" args"), std::string::npos) << v11;
  const std::string single = tool_call_gbnf(ToolCallFormat::kMistral, tools, false, true);
  EXPECT_NE(single.find("tc-calls ::= \"[TOOL_CALLS][\" tc-call \"]\""), std::string::npos) << single;
}

TEST(ToolCallGbnf, NamesAreEscaped) {
  const std::string g = tool_call_gbnf(ToolCallFormat::kHermes, {{"we\"ird\\name", "args"}}, false, true);
  EXPECT_NE(g.find(R"(\"name\": \"we\\\"ird\\\\name\")"), std::string::npos) << g;
}

TEST(ToolCallGbnf, NoToolsIsFreeText) {
  const std::string g = tool_call_gbnf(ToolCallFormat::kHermes, {}, true, true);
  EXPECT_EQ(rules_of(g)["root"], "tc-text");
}

}  // namespace
}  // namespace cadenza::toolcall
