// Format names (--tool-call-parser, --reasoning-parser) and detection from chat templates.
// Detection looks for the markers a template writes when it renders an assistant's tool calls
// (or, for formats whose templates do not render calls, the tool-declaration markers), most
// specific first: Hermes' <tool_call> also appears inside GLM's and other templates' text.
#include <array>
#include <utility>

#include "toolcall/tool_call.h"

namespace cadenza::toolcall {

namespace {

struct Name {
  std::string_view name;
  ToolCallFormat format;
};
// The first name of each format is its canonical one.
constexpr std::array kNames{
    Name{"none", ToolCallFormat::kNone},          Name{"hermes", ToolCallFormat::kHermes},
    Name{"qwen", ToolCallFormat::kHermes},        Name{"qwen25", ToolCallFormat::kHermes},
    Name{"qwen3", ToolCallFormat::kHermes},       Name{"llama3", ToolCallFormat::kLlama3},
    Name{"llama3_json", ToolCallFormat::kLlama3}, Name{"mistral", ToolCallFormat::kMistral},
    Name{"mistral_v11", ToolCallFormat::kMistralV11},
    Name{"deepseek_v3", ToolCallFormat::kDeepSeekV3}, Name{"deepseek_r1", ToolCallFormat::kDeepSeekV3},
    Name{"deepseek_v31", ToolCallFormat::kDeepSeekV31}, Name{"kimi_k2", ToolCallFormat::kKimiK2},
    Name{"glm45", ToolCallFormat::kGlm45},        Name{"glm4_moe", ToolCallFormat::kGlm45},
    Name{"gpt_oss", ToolCallFormat::kGptOss},     Name{"harmony", ToolCallFormat::kGptOss},
};

bool has(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
}

}  // namespace

std::optional<ToolCallFormat> parse_tool_call_format(std::string_view name) {
  for (const auto& n : kNames) {
    if (n.name == name) return n.format;
  }
  return std::nullopt;
}

std::string_view tool_call_format_name(ToolCallFormat format) {
  for (const auto& n : kNames) {
    if (n.format == format) return n.name;
  }
  return "none";
}

std::optional<ToolCallFormat> detect_tool_call_format(std::string_view t) {
  if (has(t, "<|channel|>") && has(t, "<|message|>")) return ToolCallFormat::kGptOss;
  if (has(t, "<|tool_calls_section_begin|>") || has(t, "<|tool_call_begin|>") ||
      (has(t, "<|im_middle|>") && has(t, "tool_declare"))) {
    return ToolCallFormat::kKimiK2;
  }
  if (has(t, "<｜tool▁calls▁begin｜>") || has(t, "<｜tool▁call▁begin｜>")) {
    // V3 and R1 fence the arguments in ```json; V3.1 writes them right after the separator.
    return has(t, "```json") ? ToolCallFormat::kDeepSeekV3 : ToolCallFormat::kDeepSeekV31;
  }
  if (has(t, "<arg_key>")) return ToolCallFormat::kGlm45;
  if (has(t, "[TOOL_CALLS]")) {
    return has(t, "[ARGS]") ? ToolCallFormat::kMistralV11 : ToolCallFormat::kMistral;
  }
  if (has(t, "<tool_call>")) return ToolCallFormat::kHermes;
  // Llama 3.1 renders <|python_tag|> for builtin tools; 3.2 and 3.3 only ask for the bare JSON.
  if (has(t, "<|python_tag|>") ||
      (has(t, "<|start_header_id|>") && has(t, "\"parameters\""))) {
    return ToolCallFormat::kLlama3;
  }
  return std::nullopt;
}

std::optional<ReasoningFormat> parse_reasoning_format(std::string_view name) {
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "think" || name == "deepseek_r1" || name == "qwen3" || name == "glm45") {
    return ReasoningFormat::kThinkTags;
  }
  if (name == "gpt_oss") return ReasoningFormat::kGptOss;
  return std::nullopt;
}

std::string_view reasoning_format_name(ReasoningFormat format) {
  switch (format) {
    case ReasoningFormat::kNone: return "none";
    case ReasoningFormat::kThinkTags: return "think";
    case ReasoningFormat::kGptOss: return "gpt_oss";
  }
  return "none";
}

ReasoningFormat detect_reasoning_format(std::string_view t) {
  if (has(t, "<|channel|>") && has(t, "<|message|>")) return ReasoningFormat::kGptOss;
  if (has(t, "</think>")) return ReasoningFormat::kThinkTags;
  return ReasoningFormat::kNone;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  const size_t open = prompt.rfind("<think>");
  if (open == std::string_view::npos) return false;
  for (char c : prompt.substr(open + 7)) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return false;
  }
  return true;
}

}  // namespace cadenza::toolcall
