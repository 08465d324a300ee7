#include "spec/draft_model_proposer.h"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

#include "gguf/gguf.h"

namespace cadenza::spec {

namespace {

constexpr int64_t kMaxStepTokens = int64_t{1} << 24;  // Model::reserve's bound

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A token text for an error message: quoted, control bytes escaped, at most 40 bytes.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < 40; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\')
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  if (text.size() > 40) out += "...";
  return out + "'";
}

Status validate_options(const DraftModelOptions& o) {
  if (o.path.empty()) return Error("draft model: no file given");
  if (o.num_speculative_tokens < 1 || o.num_speculative_tokens > kMaxSpeculativeTokens)
    return make_error("draft model {}: num_speculative_tokens {} must be in [1, {}]", o.path,
                      o.num_speculative_tokens, kMaxSpeculativeTokens);
  if (o.num_blocks < 1) return make_error("draft model {}: num_blocks must be >= 1", o.path);
  if (o.block_size < 1) return make_error("draft model {}: block_size must be >= 1", o.path);
  if (o.max_num_seqs < 1) return make_error("draft model {}: max_num_seqs must be >= 1", o.path);
  if (o.max_model_len < 2) return make_error("draft model {}: max_model_len must be >= 2", o.path);
  if (o.max_step_tokens < o.max_num_seqs || o.max_step_tokens > kMaxStepTokens)
    return make_error("draft model {}: max_step_tokens {} must be in [max_num_seqs = {}, {}]",
                      o.path, o.max_step_tokens, o.max_num_seqs, kMaxStepTokens);
  return {};
}

// Ok when `draft` has `target`'s tokens; otherwise the first difference, naming both files.
Status check_vocabulary(const std::string& draft_path, const Tokenizer& draft,
                        const std::string& target_path, const Tokenizer& target) {
  if (draft.n_vocab() != target.n_vocab())
    return make_error("draft model {}: vocabulary of {} tokens, target {} has {}", draft_path,
                      draft.n_vocab(), target_path, target.n_vocab());
  for (int32_t id = 0; id < draft.n_vocab(); ++id) {
    if (draft.token_text(id) != target.token_text(id))
      return make_error("draft model {}: token {} is {}, target {} has {} (another vocabulary)",
                        draft_path, id, quoted(draft.token_text(id)), target_path,
                        quoted(target.token_text(id)));
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<DraftModelProposer>> DraftModelProposer::create(
    const model::Model& target, const Tokenizer& target_tokenizer, const DraftModelOptions& o) {
  if (Status st = validate_options(o); !st) return st.error_value();
  auto file = gguf::GgufFile::open(o.path);
  if (!file) return make_error("draft model: {}", file.error());  // names the file
  std::shared_ptr<const gguf::GgufFile> shared(std::move(*file));
  auto tokenizer = Tokenizer::from_gguf(*shared);
  if (!tokenizer) return make_error("draft model {}: tokenizer: {}", o.path, tokenizer.error());
  if (Status st = check_vocabulary(o.path, **tokenizer, target.file().name(), target_tokenizer); !st)
    return st.error_value();
  const int32_t n_tokens = (*tokenizer)->n_vocab();

  // The model's own config decides its reach; read it before reserving tables for it.
  auto draft = model::Model::load(shared, target.backend(),
                                  {.capacity = {1, 1, 1, 1}});
  if (!draft) return make_error("draft model: {}", draft.error());  // names the file
  const model::ModelConfig& dc = (*draft)->config();
  if (n_tokens > dc.n_vocab || n_tokens > target.config().n_vocab)
    return make_error("draft model {}: its tokenizer has {} tokens, more than the models' "
                      "embedding rows ({} draft, {} target)", o.path, n_tokens, dc.n_vocab,
                      target.config().n_vocab);
  const int32_t max_positions = static_cast<int32_t>(
      std::min<int64_t>(o.max_model_len, std::max<int64_t>(dc.context_length, 2)));
  const model::StepCapacity capacity{o.max_step_tokens, o.max_num_seqs, o.max_num_seqs,
                                     ceil_div(max_positions, o.block_size)};
  if (Status st = (*draft)->reserve(capacity); !st)
    return make_error("draft model {}: {}", o.path, st.error());
  auto p = std::unique_ptr<DraftModelProposer>(
      new DraftModelProposer(o, std::move(*draft), n_tokens, max_positions));
  auto kv = p->draft_->create_kv_cache(
      {.num_blocks = o.num_blocks,
       .block_size = o.block_size,
       .type = o.kv_type,
       .num_state_slots = o.max_num_seqs});
  if (!kv) return make_error("draft model {}: KV cache: {}", o.path, kv.error());
  p->kv_ = std::move(*kv);
  return p;
}

DraftModelProposer::DraftModelProposer(const DraftModelOptions& options,
                                       std::unique_ptr<model::Model> draft, int32_t n_draft_tokens,
                                       int32_t max_positions)
    : options_(options),
      draft_(std::move(draft)),
      manager_(std::make_unique<kv::KvCacheManager>(
          kv::KvCacheConfig{.num_blocks = options.num_blocks,
                            .block_size = options.block_size,
                            .enable_prefix_caching = false})),
      n_draft_tokens_(n_draft_tokens),
      max_positions_(max_positions) {
  const auto seqs = static_cast<size_t>(options.max_num_seqs);
  active_.reserve(seqs);
  tables_.reserve(seqs);
  picked_.reserve(seqs);
  logit_rows_.reserve(seqs);
  const auto step = static_cast<size_t>(options.max_step_tokens);
  tokens_.reserve(step);
  positions_.reserve(step);
  seq_index_.reserve(step);
  logits_.reserve(seqs * static_cast<size_t>(draft_->config().n_vocab));
}

// The KV cache goes before the model (a split model's rule; harmless here).
DraftModelProposer::~DraftModelProposer() { kv_.reset(); }

Status DraftModelProposer::propose(RequestId id, std::span<const int32_t> history,
                                   int32_t max_draft_tokens, std::vector<int32_t>& draft) {
  const DraftQuery q{id, history, max_draft_tokens};
  return propose_batch(std::span(&q, 1), std::span(&draft, 1));
}

void DraftModelProposer::release(RequestId id) {
  manager_->free(id);
  states_.erase(id);
}

bool DraftModelProposer::evict_idle() {
  bool any = false;
  for (auto it = states_.begin(); it != states_.end();) {
    if (it->second.last_call != call_) {
      manager_->free(it->first);
      it = states_.erase(it);
      any = true;
    } else {
      ++it;
    }
  }
  return any;
}

bool DraftModelProposer::prepare(size_t index, const DraftQuery& q) {
  const auto len = static_cast<int32_t>(std::min<size_t>(q.history.size(), INT32_MAX));
  const int32_t k_wanted = std::min(q.max_draft_tokens, options_.num_speculative_tokens);
  if (k_wanted < 1 || len < 1) return false;
  // Positions len - 1 (the last history token) .. len + k - 2 (the last draft fed back) are
  // computed: they must be within the draft's reach.
  const int32_t k = std::min(k_wanted, max_positions_ - len + 1);
  if (k < 1) {
    release(q.id);  // the history only grows: it never drafts again, so its blocks go now
    return false;
  }
  if (active_.size() >= static_cast<size_t>(options_.max_num_seqs)) return false;
  if (std::any_of(active_.begin(), active_.end(), [&](const Active& a) { return a.id == q.id; }))
    return false;  // the same id twice in one call
  State& st = states_[q.id];
  st.last_call = call_;

  // Keep the common prefix, but never the last history token: its logits are needed.
  const size_t limit = std::min(st.tokens.size(), static_cast<size_t>(len - 1));
  const size_t common = static_cast<size_t>(
      std::mismatch(st.tokens.begin(), st.tokens.begin() + static_cast<ptrdiff_t>(limit),
                    q.history.begin()).first - st.tokens.begin());
  for (size_t i = common; i < static_cast<size_t>(len); ++i) {
    if (q.history[i] < 0 || q.history[i] >= draft_->config().n_vocab) {
      release(q.id);  // not a token the draft can read
      return false;
    }
  }
  if (common < st.tokens.size()) {
    if (manager_->contains(q.id)) {
      Result<kv::TrimResult> t = manager_->trim(q.id, static_cast<int32_t>(common));
      // Private blocks only (no prefix caching, no fork): a trim never needs room or a copy.
      assert(t.ok() && t->status == kv::AllocStatus::kOk && t->copy.num_tokens == 0);
      if (!t.ok() || !*t) {
        release(q.id);
        return false;
      }
    }
    st.tokens.resize(common);
  }
  const int32_t total = len + k - 1;
  kv::Allocation a = manager_->allocate(q.id, total);
  if (!a && evict_idle()) a = manager_->allocate(q.id, total);
  if (!a) {
    ++num_pool_full_;
    if (st.tokens.empty() && !manager_->contains(q.id)) states_.erase(q.id);
    return false;
  }
  active_.push_back({index, q.id, &states_.at(q.id), k, static_cast<int32_t>(common)});
  return true;
}

void DraftModelProposer::clear_batch() {
  tokens_.clear();
  positions_.clear();
  seq_index_.clear();
  logit_rows_.clear();
}

void DraftModelProposer::add_token(size_t seq, int32_t token, int32_t position, bool want_logits) {
  if (want_logits) logit_rows_.push_back(static_cast<int32_t>(tokens_.size()));
  tokens_.push_back(token);
  positions_.push_back(position);
  seq_index_.push_back(static_cast<int32_t>(seq));
}

Status DraftModelProposer::run_pass() {
  const auto vocab = static_cast<size_t>(draft_->config().n_vocab);
  logits_.resize(logit_rows_.size() * vocab);
  const model::Batch batch{tokens_, positions_, seq_index_, tables_, logit_rows_};
  ++num_forward_passes_;
  if (Status st = draft_->forward(batch, *kv_, logits_); !st)
    return make_error("draft model {}: {}", options_.path, st.error());
  picked_.clear();
  for (size_t r = 0; r < logit_rows_.size(); ++r) {
    const float* row = logits_.data() + r * vocab;
    // Only real tokens (the models may have padding rows past the tokenizer's count).
    picked_.push_back(static_cast<int32_t>(std::max_element(row, row + n_draft_tokens_) - row));
  }
  return {};
}

Status DraftModelProposer::propose_batch(std::span<const DraftQuery> queries,
                                         std::span<std::vector<int32_t>> drafts) {
  assert(queries.size() == drafts.size());
  for (std::vector<int32_t>& d : drafts) d.clear();
  ++call_;
  // Every queried id counts as seen before any allocation, so that evict_idle() never frees a
  // request of this call.
  for (const DraftQuery& q : queries)
    if (auto it = states_.find(q.id); it != states_.end()) it->second.last_call = call_;
  active_.clear();
  const size_t n = std::min(queries.size(), drafts.size());
  for (size_t i = 0; i < n; ++i) prepare(i, queries[i]);
  if (active_.empty()) return {};

  tables_.clear();
  for (const Active& a : active_) tables_.push_back(manager_->block_table(a.id));

  // On a failed pass the KV of the queried requests is in an unknown state: drop it.
  const auto fail = [&](Status st) {
    for (const Active& a : active_) release(a.id);
    active_.clear();
    for (std::vector<int32_t>& d : drafts) d.clear();
    return st;
  };

  // Catch-up chunks while the remaining tokens exceed one pass; each query keeps at least its
  // last token for the first draft pass (which needs its logits).
  const auto step = static_cast<int64_t>(options_.max_step_tokens);
  int64_t remaining = 0;
  for (const Active& a : active_)
    remaining += static_cast<int64_t>(queries[a.query].history.size()) - a.next;
  while (remaining > step) {
    clear_batch();
    int64_t budget = step;
    for (size_t s = 0; s < active_.size() && budget > 0; ++s) {
      Active& a = active_[s];
      const std::span<const int32_t> h = queries[a.query].history;
      const int64_t take = std::min<int64_t>(static_cast<int64_t>(h.size()) - 1 - a.next, budget);
      for (int64_t t = 0; t < take; ++t) add_token(s, h[static_cast<size_t>(a.next + t)], static_cast<int32_t>(a.next + t), false);
      budget -= std::max<int64_t>(take, 0);
    }
    if (Status st = run_pass(); !st) return fail(st);
    for (size_t s = 0, at = 0; s < active_.size(); ++s) {
      Active& a = active_[s];
      while (at < seq_index_.size() && seq_index_[at] == static_cast<int32_t>(s)) {
        a.state->tokens.push_back(tokens_[at]);
        ++a.next;
        ++at;
      }
    }
    remaining -= static_cast<int64_t>(tokens_.size());
  }

  // The first draft pass: every query's remaining history, logits after its last token.
  clear_batch();
  for (size_t s = 0; s < active_.size(); ++s) {
    Active& a = active_[s];
    const std::span<const int32_t> h = queries[a.query].history;
    for (size_t t = static_cast<size_t>(a.next); t < h.size(); ++t)
      add_token(s, h[t], static_cast<int32_t>(t), t + 1 == h.size());
  }
  if (Status st = run_pass(); !st) return fail(st);
  for (size_t s = 0; s < active_.size(); ++s) {
    Active& a = active_[s];
    const std::span<const int32_t> h = queries[a.query].history;
    a.state->tokens.insert(a.state->tokens.end(), h.begin() + a.next, h.end());
    a.next = static_cast<int32_t>(h.size());
    drafts[a.query].push_back(picked_[s]);
  }

  // Draft passes 2..k: each query still drafting feeds back its newest draft.
  int32_t max_k = 0;
  for (const Active& a : active_) max_k = std::max(max_k, a.k);
  for (int32_t j = 1; j < max_k; ++j) {
    clear_batch();
    for (size_t s = 0; s < active_.size(); ++s) {
      const Active& a = active_[s];
      if (a.k <= j) continue;
      add_token(s, drafts[a.query].back(), a.next + j - 1, true);
    }
    if (Status st = run_pass(); !st) return fail(st);
    for (size_t r = 0; r < tokens_.size(); ++r) {
      Active& a = active_[static_cast<size_t>(seq_index_[r])];
      a.state->tokens.push_back(tokens_[r]);
      drafts[a.query].push_back(picked_[r]);
    }
  }
#ifndef NDEBUG
  for (const Active& a : active_)
    assert(a.state->tokens.size() == static_cast<size_t>(manager_->num_tokens(a.id)));
#endif
  return {};
}

}  // namespace cadenza::spec
