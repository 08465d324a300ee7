// StopStringFilter: holds back generated text that could be the start of a stop string, so that a
// stop string split across tokens never leaks into the text returned to the caller.
//
//   StopStringFilter f({"\n\n", "END"});
//   auto out = f.push(detokenizer.push(token));   // out.text: safe to return now
//   if (out.stopped) ...                           // a stop string completed; text before it
//   auto last = f.finish();                        // the generation ended another way: flush
//
// Invariant: the text released so far never contains a stop string, and any stop string that
// completes later starts inside the held text: the held text is the longest suffix of everything
// pushed that is a proper prefix of some stop string. Matching is on bytes; stop strings must be
// non-empty. Ownership: copies the stop strings. Thread-safety: one filter per request.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cadenza::engine {

class StopStringFilter {
 public:
  StopStringFilter() = default;
  explicit StopStringFilter(std::vector<std::string> stops);

  struct Output {
    std::string text;      // released text (before the stop string when stopped)
    bool stopped = false;  // a stop string completed; nothing more may be pushed
    std::string matched;   // when stopped: the stop string that completed
  };

  // Appends `text` and releases what can no longer be part of a stop string.
  Output push(std::string_view text);
  // Appends `text`, then releases everything (still cutting at a stop string it completes).
  Output finish(std::string_view text = {});

  const std::string& held() const { return held_; }

 private:
  Output process(std::string_view text, bool final);

  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace cadenza::engine
