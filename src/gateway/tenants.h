// Tenants: API keys (SHA-256 hex at rest), allowed models, token buckets for requests per minute
// and tokens per minute.
//
// Tokens: a request reserves (prompt estimate + max_tokens) up front; when the response's usage
// comes back the difference is given back (or taken: a bucket may go negative by at most its size,
// which delays the tenant's next requests).
// Thread-safety: TokenBucket is not synchronized; Tenant guards its buckets with a mutex; Tenants
// is immutable after creation.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/config.h"

namespace cadenza::gateway {

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  // rate_per_minute 0: unlimited. burst 0: rate_per_minute. Starts full.
  TokenBucket(double rate_per_minute, double burst, Clock::time_point now);
  bool unlimited() const { return rate_per_s_ <= 0; }
  double capacity() const { return capacity_; }
  // Takes n when available and returns 0; otherwise takes nothing and returns the seconds until
  // n will be available (> 0), or -1 when n exceeds the capacity (never available).
  double try_take(double n, Clock::time_point now);
  // Adds n (n < 0 takes), clamped to [-capacity, capacity].
  void adjust(double n, Clock::time_point now);
  double available(Clock::time_point now);

 private:
  void refill(Clock::time_point now);
  double rate_per_s_;
  double capacity_;
  double level_;
  Clock::time_point last_;
};

struct Admission {
  bool ok = true;
  double retry_after_s = 0;  // when !ok: seconds to wait; -1 when the request can never fit
  std::string limit;         // "requests" or "tokens"
};

class Tenant {
 public:
  Tenant(TenantConfig cfg, TokenBucket::Clock::time_point now);
  const TenantConfig& config() const { return cfg_; }
  const std::string& name() const { return cfg_.name; }
  // `requested` as the client wrote it; `model`/`version_key` as resolved ("name", "name@v").
  bool allows(const std::string& requested, const std::string& model,
              const std::string& version_key) const;
  // One request and `tokens` tokens, both or neither.
  Admission admit(double tokens, TokenBucket::Clock::time_point now);
  // After the response: `reserved` was taken, `used` were used.
  void reconcile(double reserved, double used, TokenBucket::Clock::time_point now);
  // Whether the bucket settings equal those of `c` (a reload keeps the bucket levels then).
  bool same_limits(const TenantConfig& c) const;
  // What is left in the two buckets now (infinity for an unlimited one), for GET /admin/tenants.
  std::pair<double, double> available(TokenBucket::Clock::time_point now);

 private:
  TenantConfig cfg_;
  std::mutex mu_;
  TokenBucket requests_;
  TokenBucket tokens_;
};

class Tenants {
 public:
  // Buckets of tenants with the same name and limits in `previous` are kept (their levels
  // survive a reload).
  Tenants(const std::vector<TenantConfig>& cfgs, const Tenants* previous);
  bool enabled() const { return !by_hash_.empty(); }
  // The tenant whose key hashes to the stored SHA-256, or null.
  std::shared_ptr<Tenant> find_by_key(std::string_view key) const;
  std::shared_ptr<Tenant> find_by_name(const std::string& name) const;
  std::vector<std::shared_ptr<Tenant>> all() const;  // in key-hash order

 private:
  std::map<std::string, std::shared_ptr<Tenant>> by_hash_;
};

// Rough prompt-token estimate without a tokenizer: bytes of prompt/messages text / 4, rounded up.
double estimate_prompt_tokens(std::string_view text);

}  // namespace cadenza::gateway
