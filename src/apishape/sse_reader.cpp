#include "apishape/sse_reader.h"

namespace cadenza::apishape {

void SseReader::line_done(std::vector<std::string>& out) {
  if (line_.empty()) {  // a blank line ends the event
    if (has_data_) out.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  std::string_view l = line_;
  if (l.rfind("data", 0) == 0 && (l.size() == 4 || l[4] == ':')) {
    std::string_view v = l.size() > 4 ? l.substr(5) : std::string_view{};
    if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    if (has_data_) data_ += '\n';
    data_ += v;
    has_data_ = true;
  }
  line_.clear();
}

std::vector<std::string> SseReader::feed(std::string_view bytes) {
  std::vector<std::string> out;
  if (overflow_) return out;
  for (char ch : bytes) {
    if (ch == '\n' && last_cr_) {  // CRLF: the CR ended the line already
      last_cr_ = false;
      continue;
    }
    last_cr_ = ch == '\r';
    if (ch == '\r' || ch == '\n') {
      line_done(out);
      continue;
    }
    line_ += ch;
    if (line_.size() + data_.size() > max_) {
      overflow_ = true;
      line_.clear();
      data_.clear();
      return out;
    }
  }
  return out;
}

}  // namespace cadenza::apishape
