#include "wire/sse.h"

#include <cassert>

#include <fmt/format.h>

namespace cadenza::wire {

std::string sse_event(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 8);
  for (;;) {
    const size_t end = data.find_first_of("\r\n");
    out += "data: ";
    out += data.substr(0, end);
    out += '\n';
    if (end == std::string_view::npos) break;
    const size_t next = data.compare(end, 2, "\r\n") == 0 ? end + 2 : end + 1;
    data.remove_prefix(next);
  }
  out += '\n';
  return out;
}

std::string http_chunk(std::string_view payload) {
  assert(!payload.empty() && "an empty chunk would end the body");
  return fmt::format("{:x}\r\n{}\r\n", payload.size(), payload);
}

}  // namespace cadenza::wire
