// DraftModelProposer: speculative drafts from a smaller model with the target's vocabulary (a
// draft model), run on the target's backend with its own paged KV.
//
// Per request (keyed by RequestId) it keeps the tokens whose KV the draft model has computed and
// their blocks. propose_batch() answers a whole engine step:
//   1. for each query, the common prefix of its history and those tokens is kept and the rest is
//      rolled back (a rejected draft, or a history that changed); the history's last token is
//      always recomputed, so its logits exist;
//   2. the missing history tokens are computed (catch-up: the accepted drafts and the target's
//      token; the whole prompt on a request's first call, in chunks of max_step_tokens);
//   3. k greedy draft tokens are generated, one batched forward pass of the draft model per draft
//      position over all queries at once (the first pass also carries every query's remaining
//      catch-up tokens, ragged).
// So a request whose drafts were all accepted costs k draft passes and no extra catch-up.
//
// Drafts are deterministic tokens: the draft model's argmax (ties to the lower id), with no
// probabilities attached. The engine verifies them against the target; for greedy requests that
// is comparison with the target's argmax, and a rejection sampler may treat each draft token as a
// point mass (probability 1), which is exact.
//
// Vocabulary (checked by create()): the draft's tokenizer must have the target's tokens, the same
// count and the same text for every id. The models' embedding rows may differ (padding rows, as
// between the sizes of one family): drafts are ids below the tokenizer's vocabulary, which both
// models cover. The draft's context length may be shorter than the target's max_model_len: a
// request whose history plus drafts would pass it gets no drafts from there on.
//
// Not errors (the request just gets an empty draft this step): the draft's KV pool is full (the
// proposer first frees the KV of requests that are not in this call), max_draft_tokens <= 0, a
// history token outside the draft model's vocabulary, more queries than max_num_seqs (the extra
// ones), an id given twice in one call (the second one).
// Errors: a draft forward pass failing (the drafts are empty, the queried requests' draft state is
// dropped and recomputed on their next call).
//
// Ownership: owns the draft model::Model (loaded on the target's backend), its model::KvCache and
// the block bookkeeping (kv::KvCacheManager, prefix caching off). The target model and its
// backend must outlive the proposer. Thread-safety: none (the Proposer contract); the draft
// model's forward passes run on the engine thread between the target's, never at the same time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "spec/proposer.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace cadenza::spec {

struct DraftModelOptions {
  std::string path;                    // the draft model's GGUF file (required)
  int32_t num_speculative_tokens = 4;  // cap on k per call, in [1, kMaxSpeculativeTokens]
  // The draft's KV pool (model::KvCache and kv::KvCacheManager): blocks (> 0) of block_size
  // tokens (> 0). The engine uses its own pool's count: the draft needs at most as many positions
  // per request as the target holds for it (it shares no prefix blocks, though).
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  DType kv_type = DType::F16;  // as model::KvCacheOptions::type
  int32_t max_num_seqs = 64;   // queries per call served at most, >= 1
  int32_t max_model_len = 0;   // longest history + drafts, in positions; >= 2
  // Tokens per draft forward pass (catch-up chunks), in [max_num_seqs, 2^24].
  int32_t max_step_tokens = 2048;
};

class DraftModelProposer final : public Proposer {
 public:
  // Loads options.path on target.backend(), checks its vocabulary against target_tokenizer,
  // creates its KV pool and reserves its step capacity once (max_step_tokens tokens, max_num_seqs
  // logit rows and sequences, tables for min(max_model_len, draft context) positions).
  // Errors, each naming the draft file: bad options, an unreadable or invalid file, no usable
  // tokenizer, a vocabulary that differs from the target's (the first difference: the token
  // count, or the first id whose text differs, with both files named), KV or scratch memory
  // that cannot be allocated.
  static Result<std::unique_ptr<DraftModelProposer>> create(const model::Model& target,
                                                            const Tokenizer& target_tokenizer,
                                                            const DraftModelOptions& options);
  ~DraftModelProposer() override;

  // propose_batch() with one query.
  Status propose(RequestId id, std::span<const int32_t> history, int32_t max_draft_tokens,
                 std::vector<int32_t>& draft) override;
  // The steps of the header comment. Precondition: queries.size() == drafts.size(). k for a
  // query is min(max_draft_tokens, num_speculative_tokens, positions left in the draft's reach).
  Status propose_batch(std::span<const DraftQuery> queries,
                       std::span<std::vector<int32_t>> drafts) override;
  // Frees the request's draft KV blocks and forgets its tokens. Unknown ids are ignored.
  void release(RequestId id) override;
  std::string_view name() const override { return "draft"; }

  const model::Model& draft_model() const { return *draft_; }
  const DraftModelOptions& options() const { return options_; }
  // The draft's KV pool: blocks in it, and blocks held by requests (0 once every request has been
  // released).
  int32_t num_kv_blocks() const { return manager_->num_blocks(); }
  int32_t num_used_kv_blocks() const { return manager_->num_blocks() - manager_->num_free_blocks(); }
  // Requests with draft state (tokens computed).
  size_t num_requests() const { return states_.size(); }
  // Times a query got no draft because the draft's pool had no room for it.
  int64_t num_pool_full() const { return num_pool_full_; }
  // Draft model forward passes run so far.
  int64_t num_forward_passes() const { return num_forward_passes_; }

 private:
  struct State {
    std::vector<int32_t> tokens;  // computed into the draft's KV, in position order
    uint64_t last_call = 0;       // the propose_batch call that last saw this id
  };
  // One query taking part in this call's passes.
  struct Active {
    size_t query = 0;       // index into the call's queries
    RequestId id = 0;
    State* state = nullptr;
    int32_t k = 0;          // drafts wanted
    int32_t next = 0;       // the first history position not yet computed
  };

  DraftModelProposer(const DraftModelOptions& options, std::unique_ptr<model::Model> draft,
                     int32_t n_draft_tokens, int32_t max_positions);
  // Steps 1 and the allocation for one query; true when it takes part in this call's passes.
  bool prepare(size_t index, const DraftQuery& q);
  // Frees the blocks of requests not seen in this call; true when any were freed.
  bool evict_idle();
  // One forward pass over batch_* (logit rows: logit_rows_), argmax of each row into picked_.
  Status run_pass();
  void clear_batch();
  void add_token(size_t seq, int32_t token, int32_t position, bool want_logits);

  DraftModelOptions options_;
  std::unique_ptr<model::Model> draft_;
  std::unique_ptr<model::KvCache> kv_;
  std::unique_ptr<kv::KvCacheManager> manager_;
  int32_t n_draft_tokens_ = 0;  // drafts are ids in [0, n_draft_tokens_) (the tokenizer's count)
  int32_t max_positions_ = 0;   // positions the draft may compute: min(max_model_len, context)
  std::unordered_map<RequestId, State> states_;
  uint64_t call_ = 0;
  int64_t num_pool_full_ = 0;
  int64_t num_forward_passes_ = 0;

  // Reused from call to call.
  std::vector<Active> active_;
  std::vector<int32_t> tokens_, positions_, seq_index_, logit_rows_, picked_;
  std::vector<std::span<const int32_t>> tables_;
  std::vector<float> logits_;
};

}  // namespace cadenza::spec
