// The response cache in Redis (hiredis): GET and SET key value EX ttl, keys prefixed with
// cache.redis.prefix. Several gateways can share one Redis.
//
// Calls are synchronous with a timeout (cache.redis.timeout_ms) on one connection guarded by a
// mutex; they run on the calling I/O thread. A failed call counts as a miss (get) or is dropped
// (put), and the connection is re-opened on the next call (at most once per second).
// Thread-safety: safe from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>

#include "gateway/cache.h"

struct redisContext;

namespace cadenza::gateway {

class RedisCache : public ResponseCache {
 public:
  // Connects and PINGs. Errors: unreachable, not answering PONG.
  static Result<std::unique_ptr<RedisCache>> connect(const CacheConfig& cfg);
  ~RedisCache() override;
  std::optional<std::string> get(const std::string& key) override;
  void put(const std::string& key, const std::string& value) override;
  // SCAN for the prefix's keys in batches and UNLINK them (the mutex is held throughout, so
  // other calls wait; a cache of N keys takes about N / 500 round trips).
  Result<size_t> clear() override;
  const char* backend() const override { return "redis"; }

 private:
  explicit RedisCache(const CacheConfig& cfg) : cfg_(cfg) {}
  bool ensure_connected();  // with mu_ held
  void drop();              // with mu_ held

  CacheConfig cfg_;
  std::mutex mu_;
  redisContext* ctx_ = nullptr;
  std::chrono::steady_clock::time_point next_attempt_{};
};

}  // namespace cadenza::gateway
