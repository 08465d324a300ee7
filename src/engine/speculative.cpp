// EngineCore's speculative decoding: drafts before schedule(), verification after the forward pass
// (see speculative.h for the rules and src/engine/README.md "Speculative decoding").
#include <algorithm>
#include <cassert>

#include "engine/engine_core.h"
#include "spec/ngram_proposer.h"

namespace cadenza::engine {

const char* to_string(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::kNone: return "none";
    case SpeculativeMethod::kNgram: return "ngram";
    case SpeculativeMethod::kDraft: return "draft";
  }
  return "?";
}

Result<SpeculativeMethod> parse_speculative_method(std::string_view name) {
  if (name == "none") return SpeculativeMethod::kNone;
  if (name == "ngram") return SpeculativeMethod::kNgram;
  if (name == "draft") return SpeculativeMethod::kDraft;
  return make_error("speculative: unknown method '{}' (expected none, ngram or draft)", name);
}

Status validate(const SpeculativeConfig& c) {
  if (c.method == SpeculativeMethod::kDraft && c.draft_model.empty())
    return Error("speculative: method draft needs a draft model file (--draft-model FILE)");
  if (c.method != SpeculativeMethod::kDraft && !c.draft_model.empty())
    return make_error("speculative: a draft model ({}) is only used with method draft, not {}",
                      c.draft_model, to_string(c.method));
  if (!c.enabled()) return {};
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > spec::kMaxSpeculativeTokens)
    return make_error("speculative: num_speculative_tokens {} must be in [1, {}]",
                      c.num_speculative_tokens, spec::kMaxSpeculativeTokens);
  if (c.ngram_max < 1 || c.ngram_max > spec::kMaxNgram)
    return make_error("speculative: ngram_max {} must be in [1, {}]", c.ngram_max, spec::kMaxNgram);
  if (c.ngram_min < 1 || c.ngram_min > c.ngram_max)
    return make_error("speculative: ngram_min {} must be in [1, ngram_max = {}]", c.ngram_min,
                      c.ngram_max);
  return {};
}

bool EngineCore::speculates(const Request& r) const {
  // Every request that has not opted out: greedy ones are verified by comparison with the argmax,
  // sampled ones by rejection sampling (Sampler::verify); n > 1 samples speculate each on its own
  // once forked (they are separate requests then).
  return r.params.speculative;
}

void EngineCore::propose_drafts() {
  draft_queries_.clear();
  drafting_.clear();
  for (Request* r : scheduler_->running()) {
    assert(r->num_draft_tokens == 0);
    if (!speculates(*r)) continue;
    // Decode phase only: every token but the newest has its KV.
    if (r->num_computed_tokens != r->num_tokens() - 1) continue;
    // A step emits at most k + 1 tokens: never draft past max_tokens or max_model_len, so a
    // request never holds KV beyond what it could use (the pool guarantee of create()).
    const int32_t left = std::min(r->params.max_tokens - r->num_output_tokens(),
                                  config_.max_model_len - r->num_tokens());
    const int32_t k = std::min(config_.speculative.num_speculative_tokens, left - 1);
    if (k < 1) continue;
    draft_queries_.push_back({r->id, r->tokens, k});
    drafting_.push_back(r);
  }
  if (draft_queries_.empty()) return;
  if (config_.speculative.adaptive) plan_adaptive_k();
  if (drafts_.size() < draft_queries_.size()) drafts_.resize(draft_queries_.size());
  const std::span<std::vector<int32_t>> drafts(drafts_.data(), draft_queries_.size());
  // A proposer failure only costs the speedup: this step decodes plainly (drafts are empty).
  const Clock::time_point start = Clock::now();
  if (Status st = proposer_->propose_batch(draft_queries_, drafts); !st) return;
  // The proposer's time per draft token, for adaptive k (a draft model's passes cost; n-gram
  // lookup's microseconds do not matter).
  size_t drafted = 0;
  for (const std::vector<int32_t>& d : drafts) drafted += d.size();
  if (drafted > 0) {
    const double per_token = seconds(Clock::now() - start) / static_cast<double>(drafted);
    draft_s_per_token_ = draft_cost_seen_ ? 0.9 * draft_s_per_token_ + 0.1 * per_token : per_token;
    draft_cost_seen_ = true;
  }
  for (size_t i = 0; i < drafting_.size(); ++i) {
    Request& r = *drafting_[i];
    const std::vector<int32_t>& d = drafts[i];
    assert(static_cast<int32_t>(d.size()) <= draft_queries_[i].max_draft_tokens);
    r.tokens.insert(r.tokens.end(), d.begin(), d.end());
    r.num_draft_tokens = static_cast<int32_t>(d.size());
  }
}

void EngineCore::plan_adaptive_k() {
  // Until the step cost is known, steps explore: every request drafts 1, 2, ..., K tokens in turn,
  // so that steps of different lengths are measured (equal steps say nothing about the slope).
  // After that, one step every explore_interval_ drafts the most, to refresh each request's
  // acceptance; the interval doubles (up to 4096 steps) while the plan drafts nothing between
  // explorations, since an exploration is not free (a draft model catches up on the history).
  constexpr int64_t kMinExploreInterval = 64, kMaxExploreInterval = 4096;
  if (!step_cost_.ready()) {
    const int32_t k = 1 + static_cast<int32_t>(totals_.num_steps % config_.speculative.num_speculative_tokens);
    for (spec::DraftQuery& q : draft_queries_) q.max_draft_tokens = std::min(q.max_draft_tokens, k);
    return;
  }
  // The step without drafts: every running request's next positions (a decode's one, a prompt
  // chunk's up to the budget), and a token from each decoding request.
  double positions = 0;
  for (const Request* r : scheduler_->running())
    positions += static_cast<double>(r->num_tokens() - r->num_computed_tokens);
  positions = std::max(std::min(positions, static_cast<double>(config_.max_num_batched_tokens)), 1.0);
  const size_t n = draft_queries_.size();
  draft_rates_.resize(n);
  draft_max_k_.resize(n);
  draft_k_.resize(n);
  for (size_t i = 0; i < n; ++i) draft_max_k_[i] = draft_queries_[i].max_draft_tokens;
  const auto plan = [&] {
    plan_draft_lengths(draft_rates_, draft_max_k_, step_cost_.fixed_s(), step_cost_.per_token_s(),
                       draft_s_per_token_, positions, static_cast<double>(n), draft_k_);
  };
  if (totals_.num_steps - explored_at_ >= explore_interval_) {
    // Explore only where drafts could pay at these costs if every one were accepted: exploring
    // can only find better acceptance, and it costs (a draft model catching up on a history).
    std::fill(draft_rates_.begin(), draft_rates_.end(), 1.0);
    plan();
    if (std::any_of(draft_k_.begin(), draft_k_.end(), [](int32_t k) { return k > 0; })) {
      explore_interval_ = planned_drafts_since_explore_
                              ? kMinExploreInterval
                              : std::min(2 * explore_interval_, kMaxExploreInterval);
      explored_at_ = totals_.num_steps;
      planned_drafts_since_explore_ = false;
      return;
    }
  }
  for (size_t i = 0; i < n; ++i) draft_rates_[i] = streams_.at(drafting_[i]->id)->acceptance.rate();
  plan();
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (draft_k_[i] == 0) continue;
    planned_drafts_since_explore_ = true;
    draft_queries_[kept] = draft_queries_[i];
    draft_queries_[kept].max_draft_tokens = draft_k_[i];
    drafting_[kept] = drafting_[i];
    ++kept;
  }
  draft_queries_.resize(kept);
  drafting_.resize(kept);
}

void EngineCore::verify_drafts(Request& r, const sched::ScheduledRequest& e,
                               std::span<float> rows, std::vector<RequestOutput>& outputs) {
  const int32_t k = e.num_draft_tokens;
  assert(k >= 1 && k == r.num_draft_tokens);
  assert(rows.size() == static_cast<size_t>(k + 1) * static_cast<size_t>(n_vocab_));
  draft_.assign(r.tokens.end() - k, r.tokens.end());
  r.drop_drafts();  // tokens are the real ones again; the verified ones are appended below
  Stream& s = *streams_.at(r.id);
  RequestOutput out = new_output(r.id);

  // Row i holds the logits after position start + i, i.e. after the last real token and drafts
  // 0..i-1: the row plain decoding would see as long as those drafts were accepted. Each token
  // goes through the same path as plain decoding (processing with the state after the tokens
  // before it, sampling, logprobs, stops), so the output is identical, token for token.
  // Greedy: a draft is accepted when it is the argmax; sampled: by rejection sampling
  // (Sampler::verify), which makes each emitted token distributed as plain sampling's would be.
  // The last row (after every draft was accepted) samples the bonus token plainly.
  int32_t accepted = 0, tried = 0;
  bool ended = false;
  for (int32_t i = 0; i <= k; ++i) {
    // Each row is read once, by this request: it is processed in place.
    const std::span<float> logits =
        rows.subspan(static_cast<size_t>(i) * static_cast<size_t>(n_vocab_), static_cast<size_t>(n_vocab_));
    bool match = false;
    ended = i < k ? sample_token(r, s, logits, false, out, draft_[static_cast<size_t>(i)], &match)
                  : sample_token(r, s, logits, false, out);
    if (i < k) ++tried;
    if (match) ++accepted;
    if (ended || !match) break;
  }
  // A stop on an accepted draft ends the walk without judging the drafts after it: they count
  // neither as accepted nor as tried.
  s.acceptance.add(tried, accepted);
  acceptance_.add(tried, accepted);
  ++totals_.num_spec_drafts;
  totals_.num_spec_draft_tokens += k;
  totals_.num_spec_accepted_tokens += accepted;
  for (int32_t i = 0; i < k; ++i) {
    ++totals_.spec_draft_tokens_per_position[static_cast<size_t>(i)];
    if (i < accepted) ++totals_.spec_accepted_per_position[static_cast<size_t>(i)];
  }
  totals_.num_spec_emitted_tokens += static_cast<int64_t>(out.new_token_ids.size());

  if (ended) {
    finish_ended(r, out);  // frees every block, the drafts' included
  } else {
    // KV stays valid for the last real token and the accepted drafts (equal to the emitted
    // tokens before the newest); the rejected positions go.
    const kv::BlockCopy copy = scheduler_->rollback(r.id, e.start + 1 + accepted);
    if (copy.num_tokens > 0) {
      if (Status st = copy_kv(copy); !st) {
        out.error = st.error();  // a bug if it happens: the ids come from the manager
        finish(r.id, FinishReason::kError, out);
      }
    }
  }
  outputs.push_back(std::move(out));
}

}  // namespace cadenza::engine
