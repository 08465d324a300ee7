#include "server/ttft_admission.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cadenza::server {

namespace {
// Weight of a step 64 steps ago in the decode fit: one half.
const double kDecay = std::exp2(-1.0 / 64);
// Weight of a new measurement in the feedback averages, and their bounds.
constexpr double kFeedback = 1.0 / 8;
constexpr double kMinK = 0.25, kMaxK = 4;

double ceil_div(int64_t n, int64_t d) { return static_cast<double>((n + d - 1) / d); }
double seconds_between(TtftAdmission::Clock::time_point a, TtftAdmission::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

TtftAdmission::TtftAdmission(double factor, int32_t max_num_batched_tokens)
    : factor_(factor), max_batched_(std::max(1, max_num_batched_tokens)) {}

bool TtftAdmission::calibrated() const {
  std::lock_guard lock(mu_);
  return calibrated_;
}

void TtftAdmission::calibrate_idle(double base_s, double per_token_s) {
  std::lock_guard lock(mu_);
  a_ = std::max(0.0, base_s);
  b_ = std::max(0.0, per_token_s);
  calibrated_ = a_ + b_ > 0;
}

void TtftAdmission::step_started(Clock::time_point t) {
  std::lock_guard lock(mu_);
  stepping_ = true;
  step_start_ = t;
}

void TtftAdmission::step_finished(Clock::time_point t, int64_t prompt_tokens, int64_t decodes) {
  std::lock_guard lock(mu_);
  stepping_ = false;
  const double y = seconds_between(step_start_, t);
  last_step_s_ = y;
  if (prompt_tokens != 0 || decodes <= 0) return;  // only decode-only steps are fitted
  const double x = static_cast<double>(decodes);
  auto add = [](double& sum, double v) { sum = sum * kDecay + v; };
  add(s1_, 1);
  add(sx_, x);
  add(sy_, y);
  add(sxx_, x * x);
  add(sxy_, x * y);
}

double TtftAdmission::decode_locked(double d) const {
  if (d <= 0) return 0;
  if (s1_ <= 0) return a_ + b_ * d;  // no decode step seen: a prompt step of d tokens
  const double mx = sx_ / s1_, my = sy_ / s1_;
  const double var = sxx_ / s1_ - mx * mx;
  if (var > 0.25) {  // the steps differed in size: the line
    const double c = (sxy_ / s1_ - mx * my) / var;
    const double a = my - c * mx;
    if (a >= 0 && c >= 0) return a + c * d;
  }
  return my;  // one size (the usual case under a steady load): its mean
}

void TtftAdmission::observe_first_token(const Decision& d, double measured_s) {
  std::lock_guard lock(mu_);
  if (!calibrated_ || !(measured_s > 0)) return;
  auto update = [](double& k, double sample) {
    k = std::clamp(k * (1 - kFeedback) + std::clamp(sample, kMinK, kMaxK) * kFeedback, kMinK, kMaxK);
  };
  if (!d.busy) {
    const double raw = d.idle_s / k_idle_;
    if (raw > 0) update(k_idle_, measured_s / raw);
  } else if (d.own_raw_s > 0) {
    // What the prediction's own part should have been: the measurement less the rest of the
    // step it waited for. Its spread too: the limit is checked against k_load + 2 deviations.
    const double sample = std::clamp(std::max(0.0, measured_s - d.rest_s) / d.own_raw_s, kMinK, kMaxK);
    dev_load_ = dev_load_ * (1 - kFeedback) + std::abs(sample - k_load_) * kFeedback;
    update(k_load_, sample);
  }
}

void TtftAdmission::started(uint64_t id) {
  if (id == 0) return;
  std::lock_guard lock(mu_);
  std::erase_if(waiting_, [id](const Waiting& w) { return w.id == id; });
}

void TtftAdmission::clear_waiting() {
  std::lock_guard lock(mu_);
  waiting_.clear();
}

TtftAdmission::Decision TtftAdmission::decide(int64_t prompt_tokens, int64_t queued_tokens,
                                              int64_t decoding, Clock::time_point now) {
  Decision d;
  if (!enabled()) return d;
  std::lock_guard lock(mu_);
  if (!calibrated_) return d;
  const int64_t p = std::max<int64_t>(1, prompt_tokens);
  const int64_t q = std::max<int64_t>(0, queued_tokens);
  const int64_t dec = std::clamp<int64_t>(decoding, 0, max_batched_ - 1);
  d.idle_s = k_idle_ * (a_ + b_ * static_cast<double>(p));
  d.busy = stepping_ || q > 0 || dec > 0 || !waiting_.empty();
  const auto after = [&](double s) {
    return now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  if (!d.busy) {
    d.predicted_s = d.idle_s;
    d.id = next_id_++;
    waiting_.push_back({d.id, after(d.predicted_s), after(factor_ * d.idle_s)});
    return d;
  }
  const double rest =
      stepping_ ? std::max(0.0, last_step_s_ - seconds_between(step_start_, now)) : 0;
  d.rest_s = rest;
  const double steps = ceil_div(q + p, max_batched_ - dec);
  // Without decodes a step still costs the idle prompt step's fixed part.
  const double per_step = dec > 0 ? decode_locked(static_cast<double>(dec)) : a_;
  d.own_raw_s = steps * per_step + b_ * static_cast<double>(q + p);
  const double k = k_load_ + 2 * dev_load_;  // most measurements fall under this
  d.predicted_s = rest + k * d.own_raw_s;
  const double limit = factor_ * d.idle_s;
  // The prompts admitted before it and not started: this one's tokens lengthen their step.
  const auto delay = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(k * b_ * static_cast<double>(p)));
  double least_slack = std::numeric_limits<double>::infinity();
  for (const Waiting& w : waiting_) {
    least_slack = std::min(least_slack, seconds_between(w.predicted + delay, w.limit));
  }
  d.admit = d.predicted_s <= limit && least_slack >= 0;
  if (!d.admit) {
    d.retry_after_s = std::max({0.001, rest, d.predicted_s - limit});
    return d;
  }
  for (Waiting& w : waiting_) w.predicted += delay;
  d.id = next_id_++;
  waiting_.push_back({d.id, after(d.predicted_s), after(limit)});
  return d;
}

TtftAdmission::Model TtftAdmission::model() const {
  std::lock_guard lock(mu_);
  Model m{a_, b_, 0, 0, k_idle_, k_load_, dev_load_};
  if (s1_ > 0) {
    const double mx = sx_ / s1_;
    const double at1 = decode_locked(1), atm = decode_locked(mx);
    m.dec_c = mx > 1 ? (atm - at1) / (mx - 1) : 0;
    m.dec_a = at1 - m.dec_c;
  }
  return m;
}

PrefixEstimate::PrefixEstimate(int32_t block_size, size_t capacity)
    : block_(std::max(1, block_size)), capacity_(std::max<size_t>(1, capacity)) {}

std::vector<uint64_t> PrefixEstimate::block_hashes(const std::vector<int32_t>& prompt) const {
  std::vector<uint64_t> out;
  uint64_t h = 0x9e3779b97f4a7c15ull;
  const size_t full = prompt.size() / static_cast<size_t>(block_);
  out.reserve(full);
  for (size_t b = 0; b < full; ++b) {
    for (int32_t i = 0; i < block_; ++i) {  // FNV-1a over the chain and the block's tokens
      h = (h ^ static_cast<uint32_t>(prompt[b * static_cast<size_t>(block_) + static_cast<size_t>(i)])) *
          0x100000001b3ull;
    }
    out.push_back(h);
  }
  return out;
}

int64_t PrefixEstimate::cached_tokens(const std::vector<int32_t>& prompt) const {
  const std::vector<uint64_t> hashes = block_hashes(prompt);
  std::lock_guard lock(mu_);
  int64_t cached = 0;
  for (uint64_t h : hashes) {
    auto it = last_used_.find(h);
    if (it == last_used_.end()) break;
    it->second = ++clock_;
    cached += block_;
  }
  return std::min<int64_t>(cached, static_cast<int64_t>(prompt.size()) - 1);
}

void PrefixEstimate::add(const std::vector<int32_t>& prompt) {
  const std::vector<uint64_t> hashes = block_hashes(prompt);
  std::lock_guard lock(mu_);
  for (uint64_t h : hashes) last_used_[h] = ++clock_;
  if (last_used_.size() <= capacity_) return;
  // Over capacity: drop the least recently used quarter (one pass; amortized).
  std::vector<uint64_t> ages;
  ages.reserve(last_used_.size());
  for (const auto& [hash, used] : last_used_) ages.push_back(used);
  const size_t drop = last_used_.size() - capacity_ * 3 / 4;
  std::nth_element(ages.begin(), ages.begin() + static_cast<std::ptrdiff_t>(drop - 1), ages.end());
  const uint64_t cutoff = ages[drop - 1];
  std::erase_if(last_used_, [cutoff](const auto& e) { return e.second <= cutoff; });
}

}  // namespace cadenza::server
