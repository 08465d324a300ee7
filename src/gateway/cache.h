// The response cache: exact match for deterministic requests (temperature 0 or a fixed seed,
// n = 1, not streamed). Streamed requests are never cached (nor answered from the cache): a
// stream's timing is part of what the client asked for. The key is the model version plus the
// normalised request (its JSON with sorted keys, without model/stream/user fields), hashed.
//
// Backends: LruCache in process (default) and RedisCache (redis_cache.h).
// Thread-safety: every ResponseCache is safe to call from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json_fwd.hpp>

#include "gateway/config.h"
#include "util/result.h"

namespace cadenza::gateway {

class ResponseCache {
 public:
  virtual ~ResponseCache() = default;
  virtual std::optional<std::string> get(const std::string& key) = 0;
  virtual void put(const std::string& key, const std::string& value) = 0;
  // Drops every entry this gateway's cache holds (for Redis: every key under the configured
  // prefix, which other gateways sharing it see too). Returns how many were dropped. Errors: the
  // backend could not be reached (some entries may be gone already).
  virtual Result<size_t> clear() = 0;
  virtual const char* backend() const = 0;
};

// The cache key of a request for the version `version_key` on `route`, or nullopt when the
// request is not cacheable.
std::optional<std::string> cache_key(const nlohmann::json& request, const std::string& route,
                                     const std::string& version_key);

// Least recently used, at most `max_entries` entries, each valid for `ttl`. Expired entries are
// dropped when looked up or when they reach the LRU end.
class LruCache : public ResponseCache {
 public:
  using Clock = std::chrono::steady_clock;
  LruCache(size_t max_entries, std::chrono::milliseconds ttl);
  std::optional<std::string> get(const std::string& key) override { return get(key, Clock::now()); }
  void put(const std::string& key, const std::string& value) override {
    put(key, value, Clock::now());
  }
  std::optional<std::string> get(const std::string& key, Clock::time_point now);
  void put(const std::string& key, const std::string& value, Clock::time_point now);
  Result<size_t> clear() override;
  size_t size() const;
  const char* backend() const override { return "lru"; }

 private:
  struct Entry {
    std::string key;
    std::string value;
    Clock::time_point expires;
  };
  const size_t max_entries_;
  const std::chrono::milliseconds ttl_;
  mutable std::mutex mu_;
  std::list<Entry> order_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

// The configured cache (null for backend off). Errors: Redis unreachable at start.
Result<std::shared_ptr<ResponseCache>> make_cache(const CacheConfig& cfg);

}  // namespace cadenza::gateway
