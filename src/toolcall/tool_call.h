// Tool-call and reasoning parsing of model output, per model family (see README.md here).
//
// The model's generated text (special tokens included as text: the server must detokenize with
// special tokens visible for these formats) is split into OpenAI's three fields: `content`,
// `reasoning_content` and `tool_calls`. parse_output does it for a whole output; the
// StreamingToolParser (streaming.h) does it for text that arrives in pieces, with the same result.
//
// Contracts common to every format:
//   - Text outside calls and reasoning is content. A call that is truncated (the output ends inside
//     it) or malformed (bad JSON, missing name) is content too, markers included: never an
//     exception, never a lost byte of the model's text other than markers of well-formed calls.
//   - Whitespace: a content stretch that is only whitespace (between two calls, after the last
//     one) is dropped; trailing whitespace before a call marker is dropped; content right after
//     the end of reasoning starts at its first non-whitespace character; reasoning is trimmed.
//   - arguments is always a JSON object serialized compactly (nlohmann dump, UTF-8 kept, invalid
//     UTF-8 replaced by U+FFFD); key order is the model's.
//   - ids: the model's own id where the format has one (Kimi-K2, Mistral), else generated from
//     ParseOptions::id_seed and the call's index, so that the same seed gives the same ids.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cadenza::toolcall {

// The call syntax of a model family.
enum class ToolCallFormat {
  kNone,         // no tool calls: everything outside reasoning is content
  kHermes,       // Hermes 2/3, Qwen 2.5, Qwen 3, QwQ: <tool_call>\n{"name":..,"arguments":..}\n</tool_call>
  kLlama3,       // Llama 3.1-3.3: bare {"name":..,"parameters":..} at the start, or <|python_tag|>{..}
  kMistral,      // [TOOL_CALLS][{"name":..,"arguments":..},..] (parses the v11 form too)
  kMistralV11,   // [TOOL_CALLS]name[ARGS]{..} (Magistral, Devstral, Mistral Small 3.2; parses both)
  kDeepSeekV3,   // <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{..}\n```<｜tool▁call▁end｜>
  kDeepSeekV31,  // <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜> (parses both)
  kKimiK2,       // <|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{..}<|tool_call_end|>
  kGlm45,        // <tool_call>NAME\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>..</tool_call>
  kGptOss,       // harmony: <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{..}<|call|>
};

// Where reasoning is in the output.
enum class ReasoningFormat {
  kNone,       // no reasoning: <think> is plain content
  kThinkTags,  // <think>...</think> at the start of the output (Qwen3, QwQ, DeepSeek-R1, GLM, Kimi)
  kGptOss,     // the harmony analysis channel (implied by ToolCallFormat::kGptOss whatever this says)
};

// The --tool-call-parser names: hermes (aliases qwen, qwen25, qwen3), llama3 (llama3_json),
// mistral, mistral_v11, deepseek_v3 (deepseek_r1), deepseek_v31, kimi_k2, glm45 (glm4_moe), gpt_oss
// (harmony), none. nullopt for any other name.
std::optional<ToolCallFormat> parse_tool_call_format(std::string_view name);
// The canonical name of `format` (the first of the list above).
std::string_view tool_call_format_name(ToolCallFormat format);

// The format a chat template's text implies, from the markers it renders assistant tool calls with
// (README.md lists them); nullopt when the template shows no known tool-call syntax.
std::optional<ToolCallFormat> detect_tool_call_format(std::string_view chat_template);

// The --reasoning-parser names: deepseek_r1, qwen3, glm45, think (all kThinkTags), gpt_oss, none.
std::optional<ReasoningFormat> parse_reasoning_format(std::string_view name);
std::string_view reasoning_format_name(ReasoningFormat format);
// kGptOss for harmony templates, kThinkTags for templates that mention </think>, else kNone.
ReasoningFormat detect_reasoning_format(std::string_view chat_template);
// True when the rendered prompt leaves the model inside a reasoning block: its last <think> is
// followed only by whitespace (QwQ, DeepSeek-R1 distills put "<think>\n" in the generation prompt).
// The value to pass as ParseOptions::starts_in_reasoning.
bool prompt_opens_reasoning(std::string_view rendered_prompt);

struct ParseOptions {
  ReasoningFormat reasoning = ReasoningFormat::kNone;
  bool starts_in_reasoning = false;  // the output begins inside <think> (see prompt_opens_reasoning)
  uint64_t id_seed = 0;              // generated ids derive from it: pass a per-request random value
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object, compact
  bool operator==(const ToolCall&) const = default;
};

struct ParsedOutput {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
  bool operator==(const ParsedOutput&) const = default;
};

// The whole output `text` split into its fields (see the header comment for the rules).
ParsedOutput parse_output(ToolCallFormat format, std::string_view text,
                          const ParseOptions& options = {});

}  // namespace cadenza::toolcall
