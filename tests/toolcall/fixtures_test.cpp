// parse_output over every fixture file (fixtures.h), and the per-family rules the fixtures do not
// show by themselves.
#include "fixtures.h"

#include <cctype>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "toolcall/tool_call.h"

namespace cadenza::toolcall::test {
namespace {

class FixtureTest : public testing::TestWithParam<Fixture> {};

TEST_P(FixtureTest, ParseOutputMatchesExpected) {
  const Fixture& f = GetParam();
  expect_matches(parse_output(f.format, f.text, f.options), f.expected);
}

INSTANTIATE_TEST_SUITE_P(All, FixtureTest, testing::ValuesIn(load_fixtures()), fixture_name);

TEST(FixtureFiles, EveryFamilyHasTheRequiredCases) {
  std::map<std::string, std::set<std::string>> names;
  for (const auto& f : load_fixtures()) names[f.family].insert(f.name);
  for (const char* family : {"hermes", "llama3", "mistral", "deepseek_v3", "deepseek_v31", "kimi_k2", "glm45", "gpt_oss"}) {
    for (const char* c : {"plain", "one_call", "several_calls", "interleaved", "truncated", "malformed"}) {
      EXPECT_TRUE(names[family].count(c)) << family << " has no fixture " << c;
    }
  }
}

TEST(ParseOutput, SameSeedSameIdsOtherSeedOtherIds) {
  const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  auto a = parse_output(ToolCallFormat::kHermes, text, {.id_seed = 7});
  auto b = parse_output(ToolCallFormat::kHermes, text, {.id_seed = 7});
  auto c = parse_output(ToolCallFormat::kHermes, text, {.id_seed = 8});
  ASSERT_EQ(a.tool_calls.size(), 1u);
  EXPECT_EQ(a.tool_calls[0].id, b.tool_calls[0].id);
  EXPECT_NE(a.tool_calls[0].id, c.tool_calls[0].id);
  EXPECT_TRUE(a.tool_calls[0].id.starts_with("call_"));
}

TEST(ParseOutput, MistralIdsAreNineAlphanumerics) {
  auto r = parse_output(ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}, \"id\": \"bad id\"}]");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].id.size(), 9u);
  for (char c : r.tool_calls[0].id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)));
  auto kept = parse_output(ToolCallFormat::kMistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}, \"id\": \"abcDEF123\"}]");
  EXPECT_EQ(kept.tool_calls.at(0).id, "abcDEF123");
}

TEST(ParseOutput, ThinkIsContentWithoutAReasoningParser) {
  auto r = parse_output(ToolCallFormat::kHermes, "<think>x</think>y");
  EXPECT_EQ(r.content, "<think>x</think>y");
  EXPECT_EQ(r.reasoning_content, "");
}

TEST(ParseOutput, NoneFormatLeavesCallsAsContent) {
  const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  EXPECT_EQ(parse_output(ToolCallFormat::kNone, text).content, text);
}

TEST(ParseOutput, NeverThrowsOnArbitraryBytes) {
  std::mt19937 rng(5);
  const std::vector<std::string> pieces = {"<tool_call>", "</tool_call>", "{", "}", "\"", "[TOOL_CALLS]", "[ARGS]",
                                           "<|python_tag|>", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
                                           "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<|tool_calls_section_begin|>",
                                           "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>",
                                           "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "<|channel|>",
                                           "<|message|>", "<|call|>", "to=functions.f", "<think>", "</think>",
                                           "\"name\"", ":", ",", "[", "]", "\\", "\xff", "a", " ", "\n", "1"};
  const ToolCallFormat formats[] = {ToolCallFormat::kHermes, ToolCallFormat::kLlama3, ToolCallFormat::kMistral,
                                    ToolCallFormat::kDeepSeekV3, ToolCallFormat::kKimiK2, ToolCallFormat::kGlm45,
                                    ToolCallFormat::kGptOss};
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
    for (ToolCallFormat f : formats) {
      ParseOptions o{.reasoning = ReasoningFormat::kThinkTags};
      EXPECT_NO_THROW((void)parse_output(f, text, o)) << text;
    }
  }
}

}  // namespace
}  // namespace cadenza::toolcall::test
