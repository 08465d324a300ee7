#include "loadgen/sse_parser.h"

namespace cadenza::loadgen {

bool SseParser::feed(std::string_view bytes, const std::function<void(const SseEvent&)>& on_event) {
  if (failed_) return false;
  for (char c : bytes) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;  // "\r\n": the line already ended at "\r"
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      line_done(on_event);
      continue;
    }
    if (line_.size() >= max_line_) {
      failed_ = true;
      return false;
    }
    line_.push_back(c);
  }
  return true;
}

void SseParser::line_done(const std::function<void(const SseEvent&)>& on_event) {
  if (line_.empty()) {
    if (has_data_) on_event(pending_);
    pending_ = SseEvent{};
    has_data_ = false;
    return;
  }
  std::string_view line = line_;
  if (line.front() != ':') {
    const size_t colon = line.find(':');
    std::string_view field = line.substr(0, colon);
    std::string_view value;
    if (colon != std::string_view::npos) {
      value = line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    }
    if (field == "data") {
      if (has_data_) pending_.data.push_back('\n');
      pending_.data.append(value);
      has_data_ = true;
    } else if (field == "event") {
      pending_.event.assign(value);
    }
  }
  line_.clear();
}

}  // namespace cadenza::loadgen
