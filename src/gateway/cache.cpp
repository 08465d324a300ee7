#include "gateway/cache.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "gateway/hashing.h"
#include "gateway/redis_cache.h"

namespace cadenza::gateway {

namespace {

// 0.0 and 0, 4.0 and 4 mean the same to the server: integral floats become integers.
void normalise_numbers(nlohmann::json& j) {
  if (j.is_number_float()) {
    const double d = j.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)
      j = static_cast<int64_t>(d);
  } else if (j.is_structured()) {
    for (auto& v : j) normalise_numbers(v);
  }
}

}  // namespace

std::optional<std::string> cache_key(const nlohmann::json& request, const std::string& route,
                                     const std::string& version_key) {
  if (!request.is_object()) return std::nullopt;
  if (auto it = request.find("stream"); it != request.end() && it->is_boolean() && it->get<bool>())
    return std::nullopt;
  if (auto it = request.find("n"); it != request.end() && !(it->is_number() && *it == 1))
    return std::nullopt;
  bool deterministic = false;
  if (auto it = request.find("temperature"); it != request.end() && it->is_number())
    deterministic = it->get<double>() == 0.0;
  if (auto it = request.find("seed"); it != request.end() && it->is_number_integer())
    deterministic = true;
  if (!deterministic) return std::nullopt;
  nlohmann::json norm = request;
  for (const char* k : {"model", "stream", "stream_options", "user"}) norm.erase(k);
  normalise_numbers(norm);
  // nlohmann::json objects are ordered maps: dump() is the canonical form (sorted keys, no
  // whitespace), so key order and spacing in the client's JSON do not matter.
  return "v1:" + route + ":" + version_key + ":" + sha256_hex(norm.dump());
}

LruCache::LruCache(size_t max_entries, std::chrono::milliseconds ttl)
    : max_entries_(max_entries == 0 ? 1 : max_entries), ttl_(ttl) {}

std::optional<std::string> LruCache::get(const std::string& key, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  if (now >= it->second->expires) {
    order_.erase(it->second);
    index_.erase(it);
    return std::nullopt;
  }
  order_.splice(order_.begin(), order_, it->second);
  return it->second->value;
}

void LruCache::put(const std::string& key, const std::string& value, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    it->second->value = value;
    it->second->expires = now + ttl_;
    order_.splice(order_.begin(), order_, it->second);
    return;
  }
  order_.push_front(Entry{key, value, now + ttl_});
  index_[key] = order_.begin();
  while (order_.size() > max_entries_) {
    index_.erase(order_.back().key);
    order_.pop_back();
  }
}

Result<size_t> LruCache::clear() {
  std::lock_guard lock(mu_);
  const size_t n = order_.size();
  order_.clear();
  index_.clear();
  return n;
}

size_t LruCache::size() const {
  std::lock_guard lock(mu_);
  return order_.size();
}

Result<std::shared_ptr<ResponseCache>> make_cache(const CacheConfig& cfg) {
  switch (cfg.backend) {
    case CacheBackend::off:
      return std::shared_ptr<ResponseCache>();
    case CacheBackend::lru:
      return std::shared_ptr<ResponseCache>(
          std::make_shared<LruCache>(cfg.max_entries, std::chrono::seconds(cfg.ttl_s)));
    case CacheBackend::redis: {
      auto r = RedisCache::connect(cfg);
      if (!r) return r.error_value();
      return std::shared_ptr<ResponseCache>(std::move(*r));
    }
  }
  return std::shared_ptr<ResponseCache>();
}

}  // namespace cadenza::gateway
