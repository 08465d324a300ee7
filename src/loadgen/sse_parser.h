// Incremental parser for Server-Sent Events (the WHATWG event-stream format) as OpenAI-compatible
// servers stream them: bytes arrive in arbitrary pieces; complete events come out.
//
// Lines end with "\n", "\r\n" or "\r" (a "\r" at the end of a piece waits for the next one).
// "data:" lines are joined with "\n"; one leading space after the colon is removed; lines starting
// with ":" are comments; "event:" sets the event type; a blank line dispatches the event (events
// with no data lines are dropped, as the spec says). Other fields (id, retry) are ignored.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace cadenza::loadgen {

struct SseEvent {
  std::string event;  // "" when the stream gave no "event:" field ("message" by the spec)
  std::string data;
};

class SseParser {
 public:
  // Contract: a single line longer than max_line_bytes is an error (a runaway or binary stream).
  explicit SseParser(size_t max_line_bytes = 16u << 20) : max_line_(max_line_bytes) {}

  // Feeds bytes; calls on_event for each completed event, in order. Returns false (and stays
  // failed) when a line exceeds the limit.
  bool feed(std::string_view bytes, const std::function<void(const SseEvent&)>& on_event);

  // True when bytes of an unfinished event are buffered (a stream ending here was cut short).
  bool has_partial() const { return !line_.empty() || has_data_; }

 private:
  void line_done(const std::function<void(const SseEvent&)>& on_event);

  size_t max_line_;
  std::string line_;
  SseEvent pending_;
  bool has_data_ = false;
  bool after_cr_ = false;
  bool failed_ = false;
};

}  // namespace cadenza::loadgen
