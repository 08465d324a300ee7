// NgramProposer: prompt lookup decoding. The next tokens of a request are guessed by finding the
// most recent earlier occurrence of its last few tokens in its own history (prompt + output) and
// proposing what followed there. It pays off when the output quotes its input (code edits,
// summaries that cite, retrieval answers, licence text) and costs no model pass.
//
// The rule, for history h of length L (only its last search_window tokens are looked at):
//   for n = ngram_max down to ngram_min: if the suffix h[L-n, L) also occurs ending at some
//   e < L (h[e-n, e) == h[L-n, L)), take the largest such e and propose h[e, min(e + k, L)).
// Longer matches win over more recent ones: a longer match is the stronger evidence. The
// occurrence may overlap the suffix (a repeating pattern proposes its own continuation).
//
// Work per call is bounded: at most (search_window - 1) * ngram_max token comparisons, whatever
// the history's length (with the defaults, about 16K comparisons, a few microseconds), and it stops
// early at the most recent full ngram_max match. It keeps no per-request state.
//
// Thread-safety: none (the Proposer contract); the object is immutable after create(), so
// separate engines may each hold their own.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "spec/proposer.h"
#include "util/result.h"

namespace cadenza::spec {

inline constexpr int32_t kMaxNgram = 32;                // longest suffix that may be matched
inline constexpr int32_t kMaxSearchWindow = 1 << 18;    // most history tokens searched per call

struct NgramOptions {
  int32_t ngram_min = 1;               // shortest suffix matched, in [1, ngram_max]
  int32_t ngram_max = 4;               // longest suffix matched, in [ngram_min, kMaxNgram]
  int32_t num_speculative_tokens = 4;  // most draft tokens per call, in [1, kMaxSpeculativeTokens]
  int32_t search_window = 4096;        // last tokens of the history searched, in [ngram_max + 1, kMaxSearchWindow]
};

// Ok, or an error naming the first bad option and its allowed range (for a start-up error).
Status validate_ngram_options(const NgramOptions& options);

class NgramProposer final : public Proposer {
 public:
  // Validates `options` (validate_ngram_options' errors).
  static Result<std::unique_ptr<NgramProposer>> create(const NgramOptions& options);

  // Proposes up to min(max_draft_tokens, num_speculative_tokens) tokens by the rule above; empty
  // when no suffix of length >= ngram_min recurs in the window. Never fails. `id` is unused.
  Status propose(RequestId id, std::span<const int32_t> history, int32_t max_draft_tokens,
                 std::vector<int32_t>& draft) override;

  std::string_view name() const override { return "ngram"; }
  const NgramOptions& options() const { return options_; }

 private:
  explicit NgramProposer(const NgramOptions& options) : options_(options) {}

  NgramOptions options_;
};

}  // namespace cadenza::spec
