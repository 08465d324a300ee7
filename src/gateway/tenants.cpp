#include "gateway/tenants.h"

#include <algorithm>
#include <cmath>

#include "gateway/hashing.h"

namespace cadenza::gateway {

TokenBucket::TokenBucket(double rate_per_minute, double burst, Clock::time_point now)
    : rate_per_s_(rate_per_minute / 60.0),
      capacity_(burst > 0 ? burst : rate_per_minute),
      level_(capacity_),
      last_(now) {}

void TokenBucket::refill(Clock::time_point now) {
  if (now <= last_) return;
  const double dt = std::chrono::duration<double>(now - last_).count();
  level_ = std::min(capacity_, level_ + dt * rate_per_s_);
  last_ = now;
}

double TokenBucket::try_take(double n, Clock::time_point now) {
  if (unlimited()) return 0;
  if (n > capacity_) return -1;
  refill(now);
  if (level_ >= n) {
    level_ -= n;
    return 0;
  }
  return std::max((n - level_) / rate_per_s_, 1e-3);
}

void TokenBucket::adjust(double n, Clock::time_point now) {
  if (unlimited()) return;
  refill(now);
  level_ = std::clamp(level_ + n, -capacity_, capacity_);
}

double TokenBucket::available(Clock::time_point now) {
  if (unlimited()) return INFINITY;
  refill(now);
  return level_;
}

Tenant::Tenant(TenantConfig cfg, TokenBucket::Clock::time_point now)
    : cfg_(std::move(cfg)),
      requests_(cfg_.requests_per_minute, cfg_.request_burst, now),
      tokens_(cfg_.tokens_per_minute, cfg_.token_burst, now) {}

bool Tenant::allows(const std::string& requested, const std::string& model,
                    const std::string& version_key) const {
  for (const auto& m : cfg_.models)
    if (m == "*" || m == requested || m == model || m == version_key) return true;
  return false;
}

std::pair<double, double> Tenant::available(TokenBucket::Clock::time_point now) {
  std::lock_guard lock(mu_);
  return {requests_.available(now), tokens_.available(now)};
}

std::vector<std::shared_ptr<Tenant>> Tenants::all() const {
  std::vector<std::shared_ptr<Tenant>> out;
  for (const auto& [hash, t] : by_hash_) out.push_back(t);
  return out;
}

Admission Tenant::admit(double tokens, TokenBucket::Clock::time_point now) {
  std::lock_guard lock(mu_);
  const double r = requests_.try_take(1, now);
  if (r != 0) return {false, r, "requests"};
  const double t = tokens_.try_take(tokens, now);
  if (t != 0) {
    requests_.adjust(1, now);
    return {false, t, "tokens"};
  }
  return {};
}

void Tenant::reconcile(double reserved, double used, TokenBucket::Clock::time_point now) {
  std::lock_guard lock(mu_);
  tokens_.adjust(reserved - used, now);
}

bool Tenant::same_limits(const TenantConfig& c) const {
  return c.requests_per_minute == cfg_.requests_per_minute &&
         c.tokens_per_minute == cfg_.tokens_per_minute &&
         c.request_burst == cfg_.request_burst && c.token_burst == cfg_.token_burst;
}

Tenants::Tenants(const std::vector<TenantConfig>& cfgs, const Tenants* previous) {
  const auto now = TokenBucket::Clock::now();
  for (const auto& c : cfgs) {
    std::shared_ptr<Tenant> t;
    if (previous) {
      auto old = previous->find_by_name(c.name);
      // The old object keeps its buckets; its other settings (models, key) come from the new
      // config only when the limits are unchanged, so build a fresh tenant otherwise.
      if (old && old->same_limits(c) && old->config().key_sha256 == c.key_sha256 &&
          old->config().models == c.models)
        t = old;
    }
    if (!t) t = std::make_shared<Tenant>(c, now);
    by_hash_[c.key_sha256] = std::move(t);
  }
}

std::shared_ptr<Tenant> Tenants::find_by_key(std::string_view key) const {
  if (key.empty()) return nullptr;
  auto it = by_hash_.find(sha256_hex(key));
  return it == by_hash_.end() ? nullptr : it->second;
}

std::shared_ptr<Tenant> Tenants::find_by_name(const std::string& name) const {
  for (const auto& [h, t] : by_hash_)
    if (t->name() == name) return t;
  return nullptr;
}

double estimate_prompt_tokens(std::string_view text) {
  return std::ceil(static_cast<double>(text.size()) / 4.0);
}

}  // namespace cadenza::gateway
