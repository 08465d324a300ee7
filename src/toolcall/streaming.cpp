// StreamingToolParser: rescan and emit the growth (streaming.h).
#include "toolcall/streaming.h"

#include "toolcall/scan.h"

namespace cadenza::toolcall {

StreamingToolParser::StreamingToolParser(ToolCallFormat format, ParseOptions options)
    : format_(format), options_(options) {}

std::vector<OutputDelta> StreamingToolParser::feed(std::string_view delta) {
  if (finished_) return {};
  text_ += delta;
  return emit(false);
}

std::vector<OutputDelta> StreamingToolParser::finish() {
  if (finished_) return {};
  auto out = emit(true);
  finished_ = true;
  return out;
}

std::vector<OutputDelta> StreamingToolParser::emit(bool final) {
  auto scan = detail::scan_output(format_, text_, options_, final);
  std::vector<OutputDelta> out;
  auto grow = [&](std::string& sent, const std::string& now, OutputDelta::Kind kind) {
    if (now.size() < sent.size() || now.compare(0, sent.size(), sent) != 0) {
      consistent_ = false;
      return;
    }
    if (now.size() == sent.size()) return;
    OutputDelta d;
    d.kind = kind;
    d.text = now.substr(sent.size());
    sent = now;
    out.push_back(std::move(d));
  };
  grow(emitted_.reasoning_content, scan.reasoning, OutputDelta::Kind::kReasoning);
  grow(emitted_.content, scan.content, OutputDelta::Kind::kContent);
  if (scan.calls.size() < emitted_.tool_calls.size()) {
    consistent_ = false;
    return out;
  }
  for (size_t i = 0; i < emitted_.tool_calls.size(); ++i) {
    if (!(scan.calls[i] == emitted_.tool_calls[i])) consistent_ = false;
  }
  for (size_t i = emitted_.tool_calls.size(); i < scan.calls.size(); ++i) {
    const ToolCall& c = scan.calls[i];
    OutputDelta start;
    start.kind = OutputDelta::Kind::kToolCallStart;
    start.index = i;
    start.id = c.id;
    start.name = c.name;
    out.push_back(std::move(start));
    OutputDelta args;
    args.kind = OutputDelta::Kind::kToolCallArguments;
    args.index = i;
    args.text = c.arguments;
    out.push_back(std::move(args));
    emitted_.tool_calls.push_back(c);
  }
  return out;
}

}  // namespace cadenza::toolcall
