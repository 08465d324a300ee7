#include "spec/proposer.h"

#include <cassert>

namespace cadenza::spec {

Status Proposer::propose_batch(std::span<const DraftQuery> queries, std::span<std::vector<int32_t>> drafts) {
  assert(queries.size() == drafts.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    const DraftQuery& q = queries[i];
    if (Status st = propose(q.id, q.history, q.max_draft_tokens, drafts[i]); !st.ok()) {
      for (std::vector<int32_t>& d : drafts) d.clear();
      return st;
    }
  }
  return {};
}

}  // namespace cadenza::spec
