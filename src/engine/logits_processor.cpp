#include "engine/logits_processor.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cadenza::engine {

LogitsProcessor::LogitsProcessor(const SamplingParams& params, std::span<const int32_t> prompt,
                                 std::span<const int32_t> eog_ids, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab) {
  penalize_seen_ = params.repetition_penalty != 1.0f;
  penalize_counts_ = params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f;
  if (params.min_tokens > 0) {
    if (!params.ignore_eos) suppressed_.assign(eog_ids.begin(), eog_ids.end());
    suppressed_.insert(suppressed_.end(), params.stop_token_ids.begin(), params.stop_token_ids.end());
  }
  if (penalize_seen_) {
    seen_mask_.assign(static_cast<size_t>(n_vocab), 0);
    for (int32_t t : prompt)
      if (t >= 0 && t < n_vocab && !seen_mask_[static_cast<size_t>(t)]) {
        seen_mask_[static_cast<size_t>(t)] = 1;
        seen_ids_.push_back(t);
      }
  }
  active_ = !params.logit_bias.empty() || penalize_seen_ || penalize_counts_ ||
            !suppressed_.empty() || params.logprobs >= 0;
}

void LogitsProcessor::accept(int32_t token) {
  if (token < 0 || token >= n_vocab_) return;
  if (penalize_counts_) ++counts_[token];
  if (penalize_seen_ && !seen_mask_[static_cast<size_t>(token)]) {
    seen_mask_[static_cast<size_t>(token)] = 1;
    seen_ids_.push_back(token);
  }
}

void LogitsProcessor::apply(std::span<float> logits, int32_t num_output_tokens) const {
  for (const auto& [id, bias] : params_.logit_bias)
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[static_cast<size_t>(id)] += bias;
  if (penalize_seen_) {
    const float rp = params_.repetition_penalty;
    for (int32_t id : seen_ids_) {
      float& x = logits[static_cast<size_t>(id)];
      x = x > 0 ? x / rp : x * rp;
    }
  }
  if (penalize_counts_) {
    for (const auto& [id, count] : counts_)
      logits[static_cast<size_t>(id)] -=
          params_.presence_penalty + params_.frequency_penalty * static_cast<float>(count);
  }
  if (num_output_tokens < params_.min_tokens)
    for (int32_t id : suppressed_)
      if (id >= 0 && static_cast<size_t>(id) < logits.size())
        logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
}

TokenLogprob compute_logprobs(std::span<const float> logits, int32_t token, int32_t num_top,
                              std::vector<int32_t>& scratch) {
  const size_t n = logits.size();
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float x : logits) max_logit = std::max(max_logit, x);
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max_logit);
  const double log_z = static_cast<double>(max_logit) + std::log(sum);
  auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)]) - log_z);
  };

  TokenLogprob out;
  out.token = token;
  out.logprob = logprob(token);
  const float chosen = logits[static_cast<size_t>(token)];
  int32_t greater = 0;
  for (float x : logits) greater += x > chosen ? 1 : 0;
  out.rank = greater + 1;

  const size_t k = std::min(n, static_cast<size_t>(std::max(num_top, 0)));
  if (k > 0) {
    scratch.resize(n);
    for (size_t i = 0; i < n; ++i) scratch[i] = static_cast<int32_t>(i);
    std::partial_sort(scratch.begin(), scratch.begin() + static_cast<ptrdiff_t>(k), scratch.end(),
                      [&](int32_t a, int32_t b) {
                        const float la = logits[static_cast<size_t>(a)];
                        const float lb = logits[static_cast<size_t>(b)];
                        return la > lb || (la == lb && a < b);
                      });
    out.top.reserve(k);
    for (size_t i = 0; i < k; ++i) out.top.push_back({scratch[i], logprob(scratch[i])});
  }
  return out;
}

}  // namespace cadenza::engine
