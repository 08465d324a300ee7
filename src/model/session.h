// Session: one sequence over its own KV cache, for single-stream use (`cadenza run`, tests).
//
//   auto session = Session::create(model, {.max_tokens = 2048});
//   auto logits = (*session)->eval(prompt_ids);     // logits of the last prompt token
//   while (...) { next = sample(*logits); logits = (*session)->eval({&next, 1}); }
//
// eval() appends tokens to the sequence: their K/V stay in the cache for the following calls.
// Long inputs are split into forward passes of at most max_batch_tokens tokens; thanks to batch
// invariance the split does not change the result. create() reserves the model's scratch for
// such steps (Model::reserve); eval_all() reserves room for its logit rows on first use.
//
// Ownership: the model (and its backend) must outlive the session. Thread-safety: none; and only
// one session (or other caller of Model::forward) may run on a model at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/kv_cache.h"
#include "model/model.h"
#include "util/result.h"

namespace cadenza::model {

struct SessionOptions {
  // Tokens the sequence can hold. 0 = the model's context_length, capped at 4096 (KV memory grows
  // with it: 2 * layers * kv_heads * head_dim * 2 bytes per token with the default f16 store).
  int32_t max_tokens = 0;
  int32_t block_size = 16;
  int32_t max_batch_tokens = 512;  // tokens per forward pass
  DType kv_type = DType::F16;  // KV element type: F16, F32 or Q8_0 (see KvCacheOptions)
};

// A run of input embeddings that replace the lookups of tokens [first, first + count) of one
// eval() call (an image's embeddings at its placeholder tokens): values is [count][n_embd].
// bidirectional: the run's tokens attend to each other both ways (Gemma 3's image tokens;
// Batch::attention_spans): eval() then never ends a forward pass inside the run, which must fit
// one (max_batch_tokens).
struct InputEmbeddings {
  int32_t first = 0;
  int32_t count = 0;
  std::span<const float> values;
  bool bidirectional = false;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> create(Model& model, const SessionOptions& options = {});

  // Appends `tokens` and returns the logits of the last one ([n_vocab]). Errors (nothing is
  // appended then): empty input, a token id out of range, not enough room left.
  Result<std::vector<float>> eval(std::span<const int32_t> tokens);
  // Same, with the given embeddings in place of some tokens' lookups (Batch::embd_rows). Errors
  // also: a run outside `tokens` or values of the wrong size.
  Result<std::vector<float>> eval(std::span<const int32_t> tokens, const InputEmbeddings& embd);
  // Same, returning the logits of every token: [tokens.size()][n_vocab], row-major.
  Result<std::vector<float>> eval_all(std::span<const int32_t> tokens);
  // Same, returning every token's final normalized hidden state instead of its logits
  // ([tokens.size()][n_embd], row-major; Model::forward_hidden): what embedding models pool.
  Result<std::vector<float>> hidden_all(std::span<const int32_t> tokens);

  int32_t n_past() const { return n_past_; }      // tokens in the sequence so far
  int32_t capacity() const { return capacity_; }  // tokens it can hold
  // Keeps the first n tokens and forgets the rest (0 <= n <= n_past(); a hybrid model: 0 or
  // n_past() only, an error otherwise).
  Status rewind(int32_t n);
  void reset() { n_past_ = 0; }

  Model& model() const { return model_; }
  // Its cache: KV blocks for capacity() tokens and, for a hybrid model, one recurrent-state slot.
  const KvCache& kv() const { return *kv_; }

 private:
  Session(Model& model, std::unique_ptr<KvCache> kv, int32_t capacity, int32_t max_batch_tokens,
          const StepCapacity& step);
  // all_logits: every token's row, else the last one's; hidden: hidden states, not logits.
  Result<std::vector<float>> run(std::span<const int32_t> tokens, bool all_logits, bool hidden,
                                 const InputEmbeddings* embd = nullptr);

  Model& model_;
  std::unique_ptr<KvCache> kv_;
  std::vector<int32_t> block_table_;
  int32_t capacity_;
  int32_t max_batch_tokens_;
  StepCapacity step_;  // what the session reserved on the model (Model::reserve)
  int32_t n_past_ = 0;
};

}  // namespace cadenza::model
