// The streaming parser against parse_output: every fixture split at every byte, fed byte by byte
// and in random chunks; the concatenated events must equal the whole parse, and what has been
// emitted at any point must be a prefix of it (nothing emitted that a later byte retracts: no
// marker text leaks into content while it could still start a marker).
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fixtures.h"
#include "toolcall/streaming.h"

namespace cadenza::toolcall::test {
namespace {

// Applies events to a ParsedOutput as an OpenAI client accumulates deltas.
void apply_events(ParsedOutput& out, const std::vector<OutputDelta>& events) {
  for (const auto& e : events) {
    switch (e.kind) {
      case OutputDelta::Kind::kContent: out.content += e.text; break;
      case OutputDelta::Kind::kReasoning: out.reasoning_content += e.text; break;
      case OutputDelta::Kind::kToolCallStart:
        ASSERT_EQ(e.index, out.tool_calls.size());
        out.tool_calls.push_back(ToolCall{e.id, e.name, ""});
        break;
      case OutputDelta::Kind::kToolCallArguments:
        ASSERT_LT(e.index, out.tool_calls.size());
        out.tool_calls[e.index].arguments += e.text;
        break;
    }
  }
}

void expect_prefix(const ParsedOutput& partial, const ParsedOutput& whole, const std::string& where) {
  EXPECT_TRUE(whole.content.starts_with(partial.content)) << where << ": content '" << partial.content << "'";
  EXPECT_TRUE(whole.reasoning_content.starts_with(partial.reasoning_content)) << where;
  ASSERT_LE(partial.tool_calls.size(), whole.tool_calls.size()) << where;
  for (size_t i = 0; i < partial.tool_calls.size(); ++i) EXPECT_EQ(partial.tool_calls[i], whole.tool_calls[i]) << where;
}

// Feeds `pieces` and checks the prefix property after each and equality at the end.
void check_stream(const Fixture& f, const std::vector<std::string_view>& pieces, const std::string& how) {
  const ParsedOutput whole = parse_output(f.format, f.text, f.options);
  StreamingToolParser parser(f.format, f.options);
  ParsedOutput got;
  for (size_t i = 0; i < pieces.size(); ++i) {
    apply_events(got, parser.feed(pieces[i]));
    expect_prefix(got, whole, how + " after piece " + std::to_string(i));
    if (testing::Test::HasFailure()) return;
  }
  apply_events(got, parser.finish());
  EXPECT_EQ(got, whole) << how;
  EXPECT_TRUE(parser.consistent()) << how;
  EXPECT_EQ(parser.emitted(), whole);
  for (const auto& c : got.tool_calls) {
    EXPECT_FALSE(nlohmann::json::parse(c.arguments, nullptr, false).is_discarded()) << c.arguments;
  }
}

class StreamingTest : public testing::TestWithParam<Fixture> {};

TEST_P(StreamingTest, EverySplitPointGivesTheWholeParse) {
  const Fixture& f = GetParam();
  const std::string_view t = f.text;
  for (size_t k = 0; k <= t.size(); ++k) {
    check_stream(f, {t.substr(0, k), t.substr(k)}, "split at " + std::to_string(k));
    if (HasFailure()) return;
  }
}

TEST_P(StreamingTest, ByteByByte) {
  const Fixture& f = GetParam();
  std::vector<std::string_view> pieces;
  for (size_t i = 0; i < f.text.size(); ++i) pieces.push_back(std::string_view(f.text).substr(i, 1));
  check_stream(f, pieces, "byte by byte");
}

TEST_P(StreamingTest, RandomChunks) {
  const Fixture& f = GetParam();
  std::mt19937 rng(42);
  for (int run = 0; run < 50 && !HasFailure(); ++run) {
    std::vector<std::string_view> pieces;
    size_t pos = 0;
    while (pos < f.text.size()) {
      const size_t n = std::min<size_t>(1 + rng() % 12, f.text.size() - pos);
      pieces.push_back(std::string_view(f.text).substr(pos, n));
      pos += n;
    }
    check_stream(f, pieces, "random run " + std::to_string(run));
  }
}

INSTANTIATE_TEST_SUITE_P(All, StreamingTest, testing::ValuesIn(load_fixtures()), fixture_name);

TEST(Streaming, ContentFlowsBeforeTheOutputEnds) {
  StreamingToolParser p(ToolCallFormat::kHermes);
  auto events = p.feed("Hello there, ");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, "Hello there,");  // the trailing space waits: a call may follow
  events = p.feed("friend <tool");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, " friend");  // "<tool" could start <tool_call>: held
  events = p.feed("box>");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, " <toolbox>");
}

TEST(Streaming, CallIsAnnouncedWhenItCloses) {
  StreamingToolParser p(ToolCallFormat::kHermes, {.id_seed = 3});
  EXPECT_TRUE(p.feed("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}").empty());
  auto events = p.feed("\n</tool_call>");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, OutputDelta::Kind::kToolCallStart);
  EXPECT_EQ(events[0].name, "f");
  EXPECT_EQ(events[0].index, 0u);
  EXPECT_EQ(events[1].kind, OutputDelta::Kind::kToolCallArguments);
  EXPECT_EQ(events[1].text, "{\"a\":1}");
  EXPECT_TRUE(p.finish().empty());
  EXPECT_TRUE(p.feed("more").empty());  // after finish
}

TEST(Streaming, ReasoningStreamsWhileOpen) {
  StreamingToolParser p(ToolCallFormat::kHermes, {.reasoning = ReasoningFormat::kThinkTags});
  auto events = p.feed("<think>\nStep one. ");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, OutputDelta::Kind::kReasoning);
  EXPECT_EQ(events[0].text, "Step one.");
  events = p.feed("Step two.</th");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].text, " Step two.");
}

}  // namespace
}  // namespace cadenza::toolcall::test
