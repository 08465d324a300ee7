// An incremental reader of text/event-stream bytes (the WHATWG SSE framing): feed() takes bytes as
// they arrive in any split and returns the completed events' data (the `data:` lines joined with
// LF). Comments and other fields are skipped. The gateway reads an upstream's chat stream with it.
// Bounded: an event larger than `max_event_bytes` sets overflowed() and the reader drops input.
// Thread-safety: plain state.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cadenza::apishape {

class SseReader {
 public:
  explicit SseReader(size_t max_event_bytes = 8u << 20) : max_(max_event_bytes) {}
  std::vector<std::string> feed(std::string_view bytes);
  bool overflowed() const { return overflow_; }

 private:
  void line_done(std::vector<std::string>& out);

  size_t max_;
  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool last_cr_ = false;
  bool overflow_ = false;
};

}  // namespace cadenza::apishape
