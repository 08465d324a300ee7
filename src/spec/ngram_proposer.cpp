#include "spec/ngram_proposer.h"

#include <algorithm>

namespace cadenza::spec {

Status validate_ngram_options(const NgramOptions& o) {
  if (o.ngram_max < 1 || o.ngram_max > kMaxNgram) {
    return make_error("ngram: ngram_max {} must be in [1, {}]", o.ngram_max, kMaxNgram);
  }
  if (o.ngram_min < 1 || o.ngram_min > o.ngram_max) {
    return make_error("ngram: ngram_min {} must be in [1, ngram_max = {}]", o.ngram_min, o.ngram_max);
  }
  if (o.num_speculative_tokens < 1 || o.num_speculative_tokens > kMaxSpeculativeTokens) {
    return make_error("ngram: num_speculative_tokens {} must be in [1, {}]", o.num_speculative_tokens,
                      kMaxSpeculativeTokens);
  }
  // A window of ngram_max tokens or fewer could never hold a suffix and an earlier occurrence.
  if (o.search_window <= o.ngram_max || o.search_window > kMaxSearchWindow) {
    return make_error("ngram: search_window {} must be in [ngram_max + 1 = {}, {}]", o.search_window,
                      o.ngram_max + 1, kMaxSearchWindow);
  }
  return {};
}

Result<std::unique_ptr<NgramProposer>> NgramProposer::create(const NgramOptions& options) {
  if (Status st = validate_ngram_options(options); !st.ok()) return st.error_value();
  return std::unique_ptr<NgramProposer>(new NgramProposer(options));
}

Status NgramProposer::propose(RequestId /*id*/, std::span<const int32_t> history, int32_t max_draft_tokens,
                              std::vector<int32_t>& draft) {
  draft.clear();
  const int32_t k = std::min(max_draft_tokens, options_.num_speculative_tokens);
  if (k <= 0) return {};
  const auto window = static_cast<size_t>(options_.search_window);
  const std::span<const int32_t> h = history.size() > window ? history.last(window) : history;
  const auto len = static_cast<int32_t>(h.size());  // <= kMaxSearchWindow
  const int32_t n_min = options_.ngram_min, n_max = options_.ngram_max;

  // One backward pass over the candidate ends e (the continuation would start at h[e]). m is how
  // many tokens before e equal the history's last tokens, capped at n_max. Scanning the most
  // recent end first, the first e that reaches a match length is the most recent one with it, so
  // keeping only strict improvements gives "longest first, then most recent".
  int32_t best_len = 0;
  int32_t best_end = -1;
  for (int32_t e = len - 1; e >= n_min; --e) {
    const int32_t limit = std::min(n_max, e);
    int32_t m = 0;
    while (m < limit && h[static_cast<size_t>(e - 1 - m)] == h[static_cast<size_t>(len - 1 - m)]) ++m;
    if (m > best_len) {
      best_len = m;
      best_end = e;
      if (m == n_max) break;  // nothing older can beat a most recent full-length match
    }
  }
  if (best_len < n_min) return {};
  const int32_t count = std::min(k, len - best_end);
  draft.assign(h.begin() + best_end, h.begin() + best_end + count);
  return {};
}

}  // namespace cadenza::spec
