// gpt-oss (harmony) output: a sequence of messages, each
//   [<|start|>assistant] <|channel|>CHANNEL [to=RECIPIENT] [<|constrain|>json]<|message|>BODY END
// where END is <|end|>, <|call|> (a tool call), <|return|> (the final answer) or the next
// <|start|>. The generation prompt ends with "<|start|>assistant", so the output usually begins at
// <|channel|>. A message with a recipient "functions.NAME" is a call (its body the arguments);
// the analysis channel is reasoning; final and commentary without a recipient are content.
// <|call|> and <|return|> are stop tokens the engine may strip: a body that runs to the end of a
// final text ends there (a call then still needs its body to be a JSON object).
// Text outside harmony headers (special tokens stripped, or a model that skips them) is content.
#include "toolcall/scan.h"

namespace cadenza::toolcall::detail {

namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kRecipient = "to=";

// The word after `key` in the header, up to a space or a special token; empty when absent.
std::string_view header_word(std::string_view header, std::string_view key) {
  const size_t k = header.find(key);
  if (k == std::string_view::npos) return {};
  size_t b = k + key.size();
  size_t e = b;
  while (e < header.size() && !is_space(header[e]) && header[e] != '<') ++e;
  return header.substr(b, e - b);
}

}  // namespace

void scan_gpt_oss(std::string_view text, bool final, Sink& sink) {
  size_t pos = 0;
  while (true) {
    const size_t p = skip_space(text, pos);
    if (p == text.size()) return;
    // The generation prompt ends with "<|start|>assistant", so the first message's header may
    // continue it with the recipient: " to=functions.NAME<|channel|>commentary json<|message|>".
    const bool header_rest = pos == 0 && starts_with_at(text, p, kRecipient);
    if (!header_rest && !starts_with_at(text, p, kStart) && !starts_with_at(text, p, kChannel)) {
      if (!final && (is_partial_at(text, p, kStart) || is_partial_at(text, p, kChannel) ||
                     (pos == 0 && is_partial_at(text, p, kRecipient)))) {
        return;
      }
      // Plain text up to the next header is content.
      sink.begin_run(Target::kContent, false, "\n");
      auto next = find_first(text, p, {kStart, kChannel});
      if (!next) {
        std::string_view rest = text.substr(p);
        if (!final) rest.remove_suffix(partial_marker_tail(rest, {kStart, kChannel}));
        sink.text(rest);
        return;
      }
      sink.text(text.substr(p, next->pos - p));
      sink.end_run(true);
      pos = next->pos;
      continue;
    }
    const size_t m = text.find(kMessage, p);
    if (m == std::string_view::npos) {
      if (!final) return;
      sink.begin_run(Target::kContent, false, "\n");  // a truncated header is content
      sink.text(text.substr(p));
      return;
    }
    const std::string_view header = text.substr(p, m - p);
    const std::string_view channel = header_word(header, kChannel);
    const std::string_view recipient = header_word(header, kRecipient);
    const size_t body = m + kMessage.size();
    const auto hit = find_first(text, body, {kEnd, kCall, kReturn, kStart});
    const size_t body_end = hit ? hit->pos : text.size();
    const size_t after = !hit ? text.size() : hit->which == 3 ? hit->pos : hit->pos + (hit->which == 0 ? kEnd.size() : hit->which == 1 ? kCall.size() : kReturn.size());
    if (!recipient.empty()) {
      if (!hit && !final) return;  // a call is held until it ends
      std::string_view name = recipient;
      if (name.starts_with("functions.")) name.remove_prefix(10);
      auto args = normalize_object(trim(text.substr(body, body_end - body)));
      if (args && !name.empty()) {
        sink.call(RawCall{std::string(name), std::move(*args), {}});
      } else {
        sink.begin_run(Target::kContent, false, "\n");  // malformed: the message is content
        sink.text(text.substr(p, after - p));
        sink.end_run(true);
      }
    } else {
      sink.begin_run(channel == "analysis" ? Target::kReasoning : Target::kContent, true, "\n");
      std::string_view b = text.substr(body, body_end - body);
      if (!hit) {
        if (!final) b.remove_suffix(partial_marker_tail(b, {kEnd, kCall, kReturn, kStart}));
        sink.text(b);
        return;  // the open run is finished by the caller
      }
      sink.text(b);
      sink.end_run(true);
    }
    pos = after;
  }
}

}  // namespace cadenza::toolcall::detail
