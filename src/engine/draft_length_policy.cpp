#include "engine/draft_length_policy.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <queue>
#include <utility>

namespace cadenza::engine {

StepCostModel::StepCostModel(double half_life_steps) : decay_(std::exp2(-1.0 / half_life_steps)) {}

void StepCostModel::add(double positions, double seconds) {
  w_ = w_ * decay_ + 1.0;
  sx_ = sx_ * decay_ + positions;
  sy_ = sy_ * decay_ + seconds;
  sxx_ = sxx_ * decay_ + positions * positions;
  sxy_ = sxy_ * decay_ + positions * seconds;
  if (w_ < 8.0) return;
  const double mx = sx_ / w_, my = sy_ / w_;
  const double var = sxx_ / w_ - mx * mx;
  if (var < 0.25) return;
  per_token_s_ = std::max(0.0, (sxy_ / w_ - mx * my) / var);
  fixed_s_ = std::max(0.0, my - per_token_s_ * mx);
  has_fit_ = true;
}

AcceptanceEstimate::AcceptanceEstimate(double prior_rate)
    : accepted_(2.0 * std::clamp(prior_rate, 0.0, 1.0)), tried_(2.0) {}

void AcceptanceEstimate::add(int32_t tried, int32_t accepted) {
  assert(accepted >= 0 && (tried == accepted || tried == accepted + 1));
  constexpr double kKeep = 0.8;
  accepted_ = accepted_ * kKeep + accepted;
  tried_ = tried_ * kKeep + tried;
}

double AcceptanceEstimate::rate() const { return tried_ > 0.0 ? accepted_ / tried_ : 0.0; }

void plan_draft_lengths(std::span<const double> rates, std::span<const int32_t> max_k,
                        double fixed_s, double per_token_s, double draft_s, double base_positions,
                        double base_tokens, std::span<int32_t> k) {
  assert(rates.size() == max_k.size() && k.size() == max_k.size());
  std::fill(k.begin(), k.end(), 0);
  // (gain of the request's next draft position, request); gains fall along a request.
  std::priority_queue<std::pair<double, size_t>> next;
  for (size_t i = 0; i < rates.size(); ++i)
    if (max_k[i] > 0 && rates[i] > 0.0) next.push({std::min(rates[i], 1.0), i});
  const double position_s = per_token_s + std::max(draft_s, 0.0);  // one more draft position
  double step_s = fixed_s + per_token_s * base_positions, tokens = base_tokens;
  while (!next.empty()) {
    const auto [gain, i] = next.top();
    if (gain * step_s <= position_s * tokens) break;
    next.pop();
    ++k[i];
    step_s += position_s;
    tokens += gain;
    if (k[i] < max_k[i]) next.push({gain * std::min(rates[i], 1.0), i});
  }
}

}  // namespace cadenza::engine
