// Format detection over the real chat templates in ../shared/chat_templates, and over the
// markers of families whose templates are not there (written here from their model cards), and
// the parser names.
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "shared_data.h"
#include "toolcall/tool_call.h"

namespace cadenza::toolcall {
namespace {

std::string read_template(const std::string& name) {
  std::ifstream in(cadenza::test::shared_dir() / "chat_templates" / name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Detect, SharedTemplates) {
  CADENZA_REQUIRE_SHARED();
  const std::map<std::string, std::optional<ToolCallFormat>> expected = {
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolCallFormat::kHermes},
      {"Qwen-QwQ-32B.jinja", ToolCallFormat::kHermes},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::kHermes},
      {"Qwen-Qwen3-0.6B.jinja", ToolCallFormat::kHermes},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolCallFormat::kDeepSeekV3},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::kLlama3},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolCallFormat::kLlama3},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolCallFormat::kMistral},
      {"openai-gpt-oss-120b.jinja", ToolCallFormat::kGptOss},
      {"google-gemma-2-2b-it.jinja", std::nullopt},
      {"microsoft-Phi-3.5-mini-instruct.jinja", std::nullopt},
      {"HuggingFaceTB-SmolLM3-3B.jinja", std::nullopt},
      {"ibm-granite-granite-3.3-2B-Instruct.jinja", std::nullopt},  // <|tool_call|>: no parser yet
  };
  for (const auto& [name, format] : expected) {
    const std::string t = read_template(name);
    ASSERT_FALSE(t.empty()) << name;
    EXPECT_EQ(detect_tool_call_format(t), format) << name;
  }
  const std::map<std::string, ReasoningFormat> reasoning = {
      {"Qwen-Qwen3-0.6B.jinja", ReasoningFormat::kThinkTags},
      {"Qwen-QwQ-32B.jinja", ReasoningFormat::kThinkTags},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ReasoningFormat::kThinkTags},
      {"HuggingFaceTB-SmolLM3-3B.jinja", ReasoningFormat::kThinkTags},
      {"openai-gpt-oss-120b.jinja", ReasoningFormat::kGptOss},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ReasoningFormat::kNone},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ReasoningFormat::kNone},
  };
  for (const auto& [name, format] : reasoning) {
    EXPECT_EQ(detect_reasoning_format(read_template(name)), format) << name;
  }
}

TEST(Detect, MarkersOfOtherFamilies) {
  // Fragments in the shape of each family's template (the lines that render an assistant call).
  EXPECT_EQ(detect_tool_call_format("{{'<|tool_calls_section_begin|>'}}{% for c in calls %}<|tool_call_begin|>"),
            ToolCallFormat::kKimiK2);
  EXPECT_EQ(detect_tool_call_format("{{ '<|im_system|>tool_declare<|im_middle|>' }}"), ToolCallFormat::kKimiK2);
  EXPECT_EQ(detect_tool_call_format("{{'<｜tool▁call▁begin｜>' + name + '<｜tool▁sep｜>' + args + '<｜tool▁call▁end｜>'}}"),
            ToolCallFormat::kDeepSeekV31);
  EXPECT_EQ(detect_tool_call_format("<｜tool▁calls▁begin｜>{{ type }}<｜tool▁sep｜>{{ name }}\n```json\n"),
            ToolCallFormat::kDeepSeekV3);
  EXPECT_EQ(detect_tool_call_format("{{ '\\n<tool_call>' + name }}<arg_key>{{ k }}</arg_key>"), ToolCallFormat::kGlm45);
  EXPECT_EQ(detect_tool_call_format("{{ '[TOOL_CALLS]' + name + '[ARGS]' + args }}"), ToolCallFormat::kMistralV11);
  EXPECT_EQ(detect_tool_call_format("{{ '[TOOL_CALLS] [' }}"), ToolCallFormat::kMistral);
  EXPECT_EQ(detect_tool_call_format("{{ bos_token }}{{ messages[0].content }}"), std::nullopt);
}

TEST(Names, RoundTripAndAliases) {
  for (auto f : {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kLlama3, ToolCallFormat::kMistral,
                 ToolCallFormat::kMistralV11, ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31,
                 ToolCallFormat::kKimiK2, ToolCallFormat::kGlm45, ToolCallFormat::kGptOss}) {
    EXPECT_EQ(parse_tool_call_format(tool_call_format_name(f)), f);
  }
  EXPECT_EQ(parse_tool_call_format("qwen3"), ToolCallFormat::kHermes);
  EXPECT_EQ(parse_tool_call_format("deepseek_r1"), ToolCallFormat::kDeepSeekV3);
  EXPECT_EQ(parse_tool_call_format("nonsense"), std::nullopt);
  EXPECT_EQ(parse_reasoning_format("deepseek_r1"), ReasoningFormat::kThinkTags);
  EXPECT_EQ(parse_reasoning_format("qwen3"), ReasoningFormat::kThinkTags);
  EXPECT_EQ(parse_reasoning_format("gpt_oss"), ReasoningFormat::kGptOss);
  EXPECT_EQ(parse_reasoning_format("none"), ReasoningFormat::kNone);
  EXPECT_EQ(parse_reasoning_format("x"), std::nullopt);
}

TEST(PromptOpensReasoning, GenerationPromptEndings) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_TRUE(prompt_opens_reasoning("<｜Assistant｜><think>"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
  EXPECT_FALSE(prompt_opens_reasoning("use <think> tags\n<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace cadenza::toolcall
