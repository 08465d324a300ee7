// Proposer: the subsystem boundary between the engine and whatever guesses the next tokens of a
// request for speculative decoding (n-gram prompt lookup and a draft model today; EAGLE-style
// heads and MTP layers later). A proposal is only a guess: the engine verifies every draft token against
// the target model in one forward pass and keeps the accepted prefix, so a bad proposer costs
// speed, never correctness.
//
// Contract for every implementation:
//   - Thread-safety: none. The engine thread alone calls a proposer, one call at a time.
//   - Ownership: `history` (and DraftQuery::history) is borrowed for the duration of the call
//     only; a proposer that needs tokens later copies them. The caller owns the output vectors;
//     a proposer clears and fills them (their capacity is reused from step to step).
//   - Per-request state: a proposer may keep state keyed by RequestId (a draft model's KV, a
//     head's hidden state). The engine calls release(id) when the request finishes, is aborted or
//     is preempted; a later propose() for the same id must then work as for a new request.
//     Proposers without such state ignore release().
//   - Output: at most max_draft_tokens ids (<= 0 means propose nothing), each a token id of the
//     target's vocabulary. An empty draft is a normal answer ("no guess this step").
//   - History: the request's prompt followed by its output so far, oldest first; it only grows
//     between calls for the same id, except after release().
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "request/request_id.h"
#include "util/result.h"

namespace cadenza::spec {

inline constexpr int32_t kMaxSpeculativeTokens = 32;  // most draft tokens per request and step

// One request's question in a batched propose_batch() call.
struct DraftQuery {
  RequestId id = 0;
  std::span<const int32_t> history;  // prompt + output so far; borrowed for the call
  int32_t max_draft_tokens = 0;      // this step's k for the request; <= 0: skip it
};

class Proposer {
 public:
  virtual ~Proposer() = default;

  // Writes up to max_draft_tokens draft ids that would follow `history` into `draft` (cleared
  // first). Errors are for failures outside the caller's control (a draft model's forward pass
  // failing); `draft` is then empty and the engine decodes without speculation this step.
  virtual Status propose(RequestId id, std::span<const int32_t> history, int32_t max_draft_tokens,
                         std::vector<int32_t>& draft) = 0;

  // Every query of one engine step at once: drafts[i] answers queries[i] (precondition: the same
  // sizes). Model-based proposers override this to run one batched draft pass; the default asks
  // propose() per query. On an error every draft is empty.
  virtual Status propose_batch(std::span<const DraftQuery> queries, std::span<std::vector<int32_t>> drafts);

  // The request is gone (finished, aborted, preempted): drop whatever state is kept for it.
  // Unknown ids are ignored.
  virtual void release(RequestId id) {}

  // A short name for logs and metrics labels ("ngram", "draft").
  virtual std::string_view name() const = 0;
};

}  // namespace cadenza::spec
