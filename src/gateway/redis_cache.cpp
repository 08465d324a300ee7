#include "gateway/redis_cache.h"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

namespace cadenza::gateway {

namespace {

timeval to_timeval(int ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r) freeReplyObject(r);
  }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

}  // namespace

Result<std::unique_ptr<RedisCache>> RedisCache::connect(const CacheConfig& cfg) {
  std::unique_ptr<RedisCache> c(new RedisCache(cfg));
  std::lock_guard lock(c->mu_);
  if (!c->ensure_connected())
    return make_error("cache.redis: cannot connect to {}:{}", cfg.redis_host, cfg.redis_port);
  ReplyPtr r(static_cast<redisReply*>(redisCommand(c->ctx_, "PING")));
  if (!r || r->type == REDIS_REPLY_ERROR)
    return make_error("cache.redis: {}:{} does not answer PING", cfg.redis_host, cfg.redis_port);
  return c;
}

RedisCache::~RedisCache() {
  std::lock_guard lock(mu_);
  drop();
}

void RedisCache::drop() {
  if (ctx_) redisFree(ctx_);
  ctx_ = nullptr;
}

bool RedisCache::ensure_connected() {
  if (ctx_) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_attempt_) return false;
  next_attempt_ = now + std::chrono::seconds(1);
  const timeval tv = to_timeval(cfg_.redis_timeout_ms);
  ctx_ = redisConnectWithTimeout(cfg_.redis_host.c_str(), cfg_.redis_port, tv);
  if (!ctx_ || ctx_->err) {
    spdlog::warn("gateway cache: redis {}:{}: {}", cfg_.redis_host, cfg_.redis_port,
                 ctx_ ? ctx_->errstr : "out of memory");
    drop();
    return false;
  }
  redisSetTimeout(ctx_, tv);
  return true;
}

std::optional<std::string> RedisCache::get(const std::string& key) {
  std::lock_guard lock(mu_);
  if (!ensure_connected()) return std::nullopt;
  const std::string k = cfg_.redis_prefix + key;
  ReplyPtr r(static_cast<redisReply*>(redisCommand(ctx_, "GET %b", k.data(), k.size())));
  if (!r) {
    drop();
    return std::nullopt;
  }
  if (r->type != REDIS_REPLY_STRING) return std::nullopt;
  return std::string(r->str, r->len);
}

void RedisCache::put(const std::string& key, const std::string& value) {
  std::lock_guard lock(mu_);
  if (!ensure_connected()) return;
  const std::string k = cfg_.redis_prefix + key;
  const std::string ttl = std::to_string(cfg_.ttl_s);
  ReplyPtr r(static_cast<redisReply*>(redisCommand(ctx_, "SET %b %b EX %s", k.data(), k.size(),
                                                   value.data(), value.size(), ttl.c_str())));
  if (!r) drop();
}

}  // namespace cadenza::gateway
