// tool_call_gbnf: every rule it refers to is defined (by it or as a caller's arguments rule), the
// markers are token terminals or literals as documented, and names are escaped.
#include <cctype>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "toolcall/tool_call_grammar.h"
#include "toolcall/tool_call.h"

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
  // Without a lookup every marker is a literal.
  const std::string hermes = tool_call_gbnf(ToolCallFormat::kHermes, tools, false, true);
  EXPECT_NE(hermes.find(R"("<tool_call>" "\n{\"name\": \"f\", \"arguments\": " args "}\n" "</tool_call>")"), std::string::npos) << hermes;
  const std::string kimi = tool_call_gbnf(ToolCallFormat::kKimiK2, tools, true, true);
  EXPECT_NE(kimi.find(R"("<|tool_calls_section_begin|>" tc-call+ "<|tool_calls_section_end|>")"), std::string::npos) << kimi;
  const std::string v11 = tool_call_gbnf(ToolCallFormat::kMistralV11, tools, true, true);
  EXPECT_NE(v11.find(R"("[TOOL_CALLS]" "f" "[ARGS]" args)"), std::string::npos) << v11;
  const std::string single = tool_call_gbnf(ToolCallFormat::kMistral, tools, false, true);
  EXPECT_NE(single.find(R"(tc-calls ::= "[TOOL_CALLS]" "[" tc-call "]")"), std::string::npos) << single;

  // With one: the markers the vocabulary has as control tokens become id terminals, the rest
  // stay literals.
  const std::map<std::string, int32_t, std::less<>> control = {
      {"<|channel|>", 200005}, {"<|constrain|>", 200003}, {"<|message|>", 200008}, {"<|call|>", 200012},
      {"[TOOL_CALLS]", 9}, {"[ARGS]", 32}, {"<|tool_calls_section_begin|>", 163595},
      {"<|tool_calls_section_end|>", 163596}, {"<|tool_call_begin|>", 163597},
      {"<|tool_call_argument_begin|>", 163598}, {"<|tool_call_end|>", 163599}};
  const SpecialTokenLookup lookup = [&](std::string_view text) -> std::optional<int32_t> {
    auto it = control.find(text);
    return it == control.end() ? std::nullopt : std::optional<int32_t>(it->second);
  };
  const std::string oss = tool_call_gbnf(ToolCallFormat::kGptOss, tools, false, true, lookup);
  EXPECT_NE(oss.find(R"(<[200005]> "commentary to=functions.f " <[200003]> "json" <[200008]> args <[200012]>)"),
            std::string::npos) << oss;
  const std::string v11t = tool_call_gbnf(ToolCallFormat::kMistralV11, tools, true, true, lookup);
  EXPECT_NE(v11t.find(R"(<[9]> "f" <[32]> args)"), std::string::npos) << v11t;
  const std::string kimit = tool_call_gbnf(ToolCallFormat::kKimiK2, tools, true, true, lookup);
  EXPECT_NE(kimit.find("<[163595]> tc-call+ <[163596]>"), std::string::npos) << kimit;
  EXPECT_NE(kimit.find("<[163598]> args <[163599]>"), std::string::npos) << kimit;
  const std::string hermest = tool_call_gbnf(ToolCallFormat::kHermes, tools, false, true, lookup);
  EXPECT_EQ(hermest, hermes);  // <tool_call> is not a control token here
}

// The shortest text a grammar derives (first alternative, optional and starred items left out,
// '+' once, a class as its first character, `args` as `args_text`): a sample of the call syntax.
class Expander {
 public:
  Expander(std::map<std::string, std::string> rules, std::string args_text)
      : rules_(std::move(rules)), args_(std::move(args_text)) {}
  std::string rule(const std::string& name) {
    if (name == "args") return args_;
    const std::string& body = rules_.at(name);
    size_t i = 0;
    return alternatives(body, i);
  }

 private:
  std::string alternatives(const std::string& b, size_t& i) {
    std::string first = sequence(b, i);
    while (i < b.size() && b[i] == '|') {
      ++i;
      (void)sequence(b, i);
    }
    return first;
  }
  std::string sequence(const std::string& b, size_t& i) {
    std::string out;
    while (true) {
      while (i < b.size() && b[i] == ' ') ++i;
      if (i >= b.size() || b[i] == '|' || b[i] == ')') return out;
      std::string item = atom(b, i);
      const char post = i < b.size() ? b[i] : 0;
      if (post == '?' || post == '*') {
        ++i;
        continue;
      }
      if (post == '+') ++i;
      out += item;
    }
  }
  std::string atom(const std::string& b, size_t& i) {
    const char c = b[i];
    if (c == '"') {
      std::string out;
      for (++i; b[i] != '"'; ++i) {
        if (b[i] == '\\') {
          ++i;
          out += b[i] == 'n' ? '\n' : b[i] == 't' ? '\t' : b[i];
        } else {
          out += b[i];
        }
      }
      ++i;
      return out;
    }
    if (c == '<') {
      const size_t e = b.find('>', i);
      std::string out = b.substr(i, e + 1 - i);
      i = e + 1;
      return out;
    }
    if (c == '[') {
      const size_t e = b.find(']', i);
      std::string out = b[i + 1] == '^' ? "x" : std::string(1, b[i + 1]);
      i = e + 1;
      return out;
    }
    if (c == '(') {
      ++i;
      std::string out = alternatives(b, i);
      ++i;  // ')'
      return out;
    }
    size_t j = i;
    while (j < b.size() && (std::isalnum(static_cast<unsigned char>(b[j])) || b[j] == '-')) ++j;
    std::string name = b.substr(i, j - i);
    i = j;
    return rule(name);
  }
  std::map<std::string, std::string> rules_;
  std::string args_;
};

TEST(ToolCallGbnf, TextInTheGrammarsLayoutParsesAsTheCall) {
  for (ToolCallFormat f : kFormats) {
    const std::string g = tool_call_gbnf(f, {{"get_weather", "args"}}, true, true);
    Expander e(rules_of(g), R"({"city": "Paris"})");
    const std::string text = e.rule("root");
    const ParsedOutput r = parse_output(f, text);
    ASSERT_EQ(r.tool_calls.size(), 1u) << tool_call_format_name(f) << ": " << text;
    EXPECT_EQ(r.tool_calls[0].name, "get_weather") << text;
    // GLM's grammar leaves out the (optional) pairs in the shortest text.
    EXPECT_EQ(r.tool_calls[0].arguments, f == ToolCallFormat::kGlm45 ? "{}" : R"({"city":"Paris"})") << text;
    EXPECT_EQ(r.content, "") << tool_call_format_name(f) << ": " << text;
  }
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
