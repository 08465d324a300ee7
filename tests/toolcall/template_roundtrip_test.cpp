// The real chat templates of ../shared/chat_templates render an assistant message with tool calls
// (as the conversation history sends it back to the model); the parser of the format detected
// from the same template must read those calls back from the rendered assistant turn. This ties
// each parser to the syntax its family's template actually writes, not only to hand-made fixtures.
#include <cctype>
#include <fstream>
#include <ostream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared_data.h"
#include "template/template.h"
#include "toolcall/streaming.h"
#include "toolcall/tool_call.h"

namespace cadenza::toolcall {
namespace {

using nlohmann::ordered_json;

struct Case {
  const char* file;
  int calls;                   // how many calls the template renders in one message
  bool content_null;           // the template wants content null (not "") next to tool calls
  const char* assistant_head;  // where the assistant turn starts when the prompt is no prefix
  const char* bos;
  const char* eos;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.file; }

std::string read_template(const std::string& name) {
  std::ifstream in(cadenza::test::shared_dir() / "chat_templates" / name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ordered_json tool_call(const std::string& id, const std::string& name, ordered_json args) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", std::move(args)}}}};
}

class TemplateRoundTrip : public testing::TestWithParam<Case> {};

TEST_P(TemplateRoundTrip, ParserReadsTheTemplatesCalls) {
  CADENZA_REQUIRE_SHARED();
  const Case& c = GetParam();
  const std::string source = read_template(c.file);
  ASSERT_FALSE(source.empty());
  auto format = detect_tool_call_format(source);
  ASSERT_TRUE(format.has_value()) << c.file;
  auto tmpl = tmpl::Template::parse(source);
  ASSERT_TRUE(tmpl) << tmpl.error();

  const ordered_json tools = ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "the city"},
        "unit": {"type": "string", "description": "celsius or fahrenheit"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
      "parameters": {"type": "object", "properties": {
        "timezone": {"type": "string", "description": "IANA zone"}}, "required": ["timezone"]}}}])");
  ordered_json calls = ordered_json::array();
  calls.push_back(tool_call("abc123def", "get_weather", {{"city", "Paris"}, {"unit", "celsius"}}));
  if (c.calls > 1) calls.push_back(tool_call("xyz789uvw", "get_time", {{"timezone", "Europe/Paris"}}));
  ordered_json messages = ordered_json::array();
  messages.push_back({{"role", "user"}, {"content", "What is the weather in Paris, and the time?"}});
  ordered_json context = {{"tools", tools}, {"bos_token", c.bos}, {"eos_token", c.eos}};
  tmpl::RenderOptions options;
  options.strftime_now = tmpl::fixed_clock(2026, 12, 4);

  context["messages"] = messages;
  context["add_generation_prompt"] = true;
  auto prompt = tmpl->render(context, options);
  ASSERT_TRUE(prompt) << prompt.error();
  ordered_json assistant = {{"role", "assistant"}, {"content", c.content_null ? ordered_json() : ordered_json("")},
                            {"tool_calls", calls}};
  messages.push_back(assistant);
  context["messages"] = messages;
  context["add_generation_prompt"] = false;
  auto full = tmpl->render(context, options);
  ASSERT_TRUE(full) << full.error();

  // The assistant's turn: after the generation prompt when that is a prefix, else after the
  // template's assistant header; without the end-of-turn tokens the engine stops at.
  std::string turn;
  if (full->starts_with(*prompt)) {
    turn = full->substr(prompt->size());
  } else {
    const size_t head = full->rfind(c.assistant_head);
    ASSERT_NE(head, std::string::npos) << *full;
    turn = full->substr(head + std::string_view(c.assistant_head).size());
  }
  for (bool again = true; again;) {
    again = false;
    while (!turn.empty() && (turn.back() == '\n' || turn.back() == ' ')) turn.pop_back();
    const std::string_view ends[] = {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", c.eos};
    for (std::string_view end : ends) {
      if (!end.empty() && turn.ends_with(end)) {
        turn.resize(turn.size() - end.size());
        again = true;
      }
    }
  }
  ParseOptions o;
  o.reasoning = detect_reasoning_format(source);
  const ParsedOutput r = parse_output(*format, turn, o);
  EXPECT_EQ(r.content, "") << c.file << " turn:\n" << turn;
  ASSERT_EQ(r.tool_calls.size(), calls.size()) << c.file << " turn:\n" << turn;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(r.tool_calls[i].name, calls[i]["function"]["name"]);
    EXPECT_EQ(nlohmann::ordered_json::parse(r.tool_calls[i].arguments), calls[i]["function"]["arguments"]);
  }
  // The same turn streamed byte by byte gives the same calls.
  StreamingToolParser stream(*format, o);
  for (char ch : turn) (void)stream.feed(std::string_view(&ch, 1));
  (void)stream.finish();
  EXPECT_EQ(stream.emitted(), r);
  EXPECT_TRUE(stream.consistent());
  if (*format == ToolCallFormat::kMistral) {
    EXPECT_EQ(r.tool_calls[0].id, "abc123def");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shared, TemplateRoundTrip,
    testing::Values(Case{"Qwen-Qwen3-0.6B.jinja", 2, false, "<|im_start|>assistant", "", "<|im_end|>"},
                    Case{"Qwen-Qwen2.5-7B-Instruct.jinja", 2, false, "<|im_start|>assistant", "", "<|im_end|>"},
                    Case{"Qwen-QwQ-32B.jinja", 2, false, "<|im_start|>assistant", "", "<|im_end|>"},
                    Case{"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", 2, false, "<|im_start|>assistant",
                         "<|begin_of_text|>", "<|im_end|>"},
                    Case{"meta-llama-Llama-3.1-8B-Instruct.jinja", 1, false, "<|end_header_id|>\n\n",
                         "<|begin_of_text|>", "<|eot_id|>"},
                    Case{"meta-llama-Llama-3.2-3B-Instruct.jinja", 1, false, "<|end_header_id|>\n\n",
                         "<|begin_of_text|>", "<|eot_id|>"},
                    Case{"mistralai-Mistral-Nemo-Instruct-2407.jinja", 2, false, "[/INST]", "<s>", "</s>"},
                    Case{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", 2, true, "<｜Assistant｜>",
                         "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"},
                    Case{"openai-gpt-oss-120b.jinja", 1, false, "<|start|>assistant", "", "<|return|>"}),
    [](const testing::TestParamInfo<Case>& info) {
      std::string n = info.param.file;
      n = n.substr(0, n.find(".jinja"));
      for (char& ch : n) if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

}  // namespace
}  // namespace cadenza::toolcall
