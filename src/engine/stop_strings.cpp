#include "engine/stop_strings.h"

#include <algorithm>
#include <cassert>

namespace cadenza::engine {

StopStringFilter::StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopStringFilter::Output StopStringFilter::push(std::string_view text) {
  return process(text, false);
}

StopStringFilter::Output StopStringFilter::finish(std::string_view text) {
  return process(text, true);
}

StopStringFilter::Output StopStringFilter::process(std::string_view text, bool final) {
  assert(!stopped_ && "push after a stop string completed");
  Output out;
  std::string buf = std::move(held_);
  held_.clear();
  buf.append(text);
  if (stops_.empty()) {
    out.text = std::move(buf);
    return out;
  }
  // The earliest completed stop string wins. It can only start in the old held part or later,
  // since the released text never held a stop string's start.
  size_t first = std::string::npos;
  const std::string* matched = nullptr;
  for (const std::string& s : stops_)
    if (const size_t at = buf.find(s); at < first) {
      first = at;
      matched = &s;
    }
  if (first != std::string::npos) {
    buf.resize(first);
    out.text = std::move(buf);
    out.matched = *matched;
    out.stopped = stopped_ = true;
    return out;
  }
  size_t hold = 0;
  if (!final) {
    // Longest suffix of buf that is a proper prefix of a stop string.
    for (const std::string& s : stops_) {
      for (size_t k = std::min(s.size() - 1, buf.size()); k > hold; --k) {
        if (std::string_view(buf).substr(buf.size() - k) == std::string_view(s).substr(0, k)) {
          hold = k;
          break;
        }
      }
    }
  }
  held_.assign(buf, buf.size() - hold, hold);
  buf.resize(buf.size() - hold);
  out.text = std::move(buf);
  return out;
}

}  // namespace cadenza::engine
