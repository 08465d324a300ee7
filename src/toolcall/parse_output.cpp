// parse_output and the full scan behind it and the streaming parser: the reasoning prefix, then the
// family's scanner, then ids.
#include <algorithm>
#include <cctype>

#include "toolcall/scan.h"

namespace cadenza::toolcall {
namespace detail {

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

using Scanner = void (*)(std::string_view, bool, Sink&);

Scanner scanner_for(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kNone: return scan_plain;
    case ToolCallFormat::kHermes: return scan_hermes;
    case ToolCallFormat::kLlama3: return scan_llama3;
    case ToolCallFormat::kMistral:
    case ToolCallFormat::kMistralV11: return scan_mistral;
    case ToolCallFormat::kDeepSeekV3:
    case ToolCallFormat::kDeepSeekV31: return scan_deepseek;
    case ToolCallFormat::kKimiK2: return scan_kimi_k2;
    case ToolCallFormat::kGlm45: return scan_glm45;
    case ToolCallFormat::kGptOss: return scan_gpt_oss;
  }
  return scan_plain;
}

// Splits off the <think> prefix. Returns where content starts, or nullopt when the scan must stop
// (reasoning still open, or a possible "<think>" still arriving).
std::optional<size_t> scan_think_prefix(std::string_view text, bool starts_inside, bool final,
                                        Sink& sink) {
  size_t pos = 0;
  if (starts_inside) {
    // The prompt opened the thought; a model that writes <think> again still only thinks once.
    const size_t p = skip_space(text, 0);
    if (!final && p < text.size() && is_partial_at(text, p, kThinkOpen)) return std::nullopt;
    if (starts_with_at(text, p, kThinkOpen)) pos = p + kThinkOpen.size();
  } else {
    // Only a <think> at the very start (after whitespace) opens reasoning: later in the text it is
    // more likely quoted than meant.
    const size_t p = skip_space(text, 0);
    if (!final && (p == text.size() || is_partial_at(text, p, kThinkOpen))) return std::nullopt;
    if (!starts_with_at(text, p, kThinkOpen)) return 0;
    pos = p + kThinkOpen.size();
  }
  sink.begin_run(Target::kReasoning, /*lstrip=*/true);
  const size_t close = text.find(kThinkClose, pos);
  if (close == std::string_view::npos) {
    // The output so far (or, final, all of it: a truncated thought) is reasoning.
    std::string_view rest = text.substr(pos);
    if (!final) rest.remove_suffix(partial_marker_tail(rest, {kThinkClose}));
    sink.text(rest);
    sink.finish(final);
    return std::nullopt;
  }
  sink.text(text.substr(pos, close - pos));
  sink.end_run(/*at_marker=*/true);
  return close + kThinkClose.size();
}

}  // namespace

std::string generated_id(ToolCallFormat format, uint64_t seed, size_t index) {
  static constexpr std::string_view kAlphabet =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  // splitmix64 over (seed, index): deterministic, so a stream and a whole parse agree.
  uint64_t state = seed ^ (0x9E3779B97F4A7C15ull * (index + 1));
  auto next = [&state]() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  const bool mistral = format == ToolCallFormat::kMistral || format == ToolCallFormat::kMistralV11;
  std::string id = mistral ? "" : "call_";
  const size_t n = mistral ? 9 : 24;
  for (size_t i = 0; i < n; ++i) id += kAlphabet[next() % kAlphabet.size()];
  return id;
}

ScanResult scan_output(ToolCallFormat format, std::string_view text, const ParseOptions& options,
                       bool final) {
  Sink sink;
  size_t content_start = 0;
  bool lstrip = false;
  bool stopped = false;
  if (format != ToolCallFormat::kGptOss && options.reasoning == ReasoningFormat::kThinkTags) {
    auto start = scan_think_prefix(text, options.starts_in_reasoning, final, sink);
    if (!start) {
      stopped = true;
    } else {
      lstrip = *start > 0;  // after </think> the template's "\n\n" is not content
      content_start = *start;
    }
  }
  if (!stopped) {
    sink.begin_run(Target::kContent, lstrip);
    scanner_for(format)(text.substr(content_start), final, sink);
    sink.finish(final);
  }
  ScanResult out;
  out.content = std::move(sink.content);
  out.reasoning = std::move(sink.reasoning);
  for (auto& c : sink.calls) {
    const size_t index = out.calls.size();
    std::string id = std::move(c.id);
    const bool mistral = format == ToolCallFormat::kMistral || format == ToolCallFormat::kMistralV11;
    // Mistral's templates reject ids that are not 9 alphanumerics when the call is sent back.
    const bool usable = !id.empty() && (!mistral || (id.size() == 9 && std::all_of(id.begin(), id.end(), [](char ch) {
                                                      return std::isalnum(static_cast<unsigned char>(ch));
                                                    })));
    if (!usable) id = generated_id(format, options.id_seed, index);
    out.calls.push_back(ToolCall{std::move(id), std::move(c.name), std::move(c.arguments)});
  }
  return out;
}

}  // namespace detail

ParsedOutput parse_output(ToolCallFormat format, std::string_view text, const ParseOptions& options) {
  auto r = detail::scan_output(format, text, options, /*final=*/true);
  return ParsedOutput{std::move(r.content), std::move(r.reasoning), std::move(r.calls)};
}

}  // namespace cadenza::toolcall
