#include "gateway/redis_cache.h"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <vector>

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

// `text` as a Redis glob that matches only itself (SCAN MATCH treats * ? [ ] and backslash as
// special).
std::string glob_literal(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

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

Result<size_t> RedisCache::clear() {
  std::lock_guard lock(mu_);
  if (!ensure_connected())
    return make_error("cache.redis: cannot connect to {}:{}", cfg_.redis_host, cfg_.redis_port);
  const std::string pattern = glob_literal(cfg_.redis_prefix) + "*";
  std::string cursor = "0";
  size_t dropped = 0;
  do {
    ReplyPtr r(static_cast<redisReply*>(redisCommand(ctx_, "SCAN %s MATCH %b COUNT 500",
                                                     cursor.c_str(), pattern.data(),
                                                     pattern.size())));
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
      if (!r) drop();
      return make_error("cache.redis: SCAN failed after dropping {} keys", dropped);
    }
    cursor.assign(r->element[0]->str, r->element[0]->len);
    const redisReply* keys = r->element[1];
    if (keys->elements == 0) continue;
    std::vector<const char*> argv{"UNLINK"};
    std::vector<size_t> lens{6};
    for (size_t i = 0; i < keys->elements; ++i) {
      argv.push_back(keys->element[i]->str);
      lens.push_back(keys->element[i]->len);
    }
    ReplyPtr u(static_cast<redisReply*>(
        redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (!u || u->type != REDIS_REPLY_INTEGER) {
      if (!u) drop();
      return make_error("cache.redis: UNLINK failed after dropping {} keys", dropped);
    }
    dropped += static_cast<size_t>(u->integer);
  } while (cursor != "0");
  return dropped;
}

}  // namespace cadenza::gateway
