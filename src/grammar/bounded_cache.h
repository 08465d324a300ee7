// BoundedCache (internal to CompiledGrammar): a string-keyed map of shared immutable values with
// a byte budget, evicting the oldest entries first. FIFO rather than LRU: the hot states of a
// grammar are revisited so often that they are re-inserted soon after an eviction, and FIFO needs
// no bookkeeping on the hit path.
//
// Thread-safety: every method locks the cache's mutex; values are shared_ptr<const V>, so a hit
// is used after the lock is released.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace cadenza::grammar {

template <typename V>
class BoundedCache {
 public:
  explicit BoundedCache(size_t capacity_bytes) : capacity_(capacity_bytes) {}

  std::shared_ptr<const V> get(std::string_view key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second->value;
  }

  // `bytes`: the value's size, charged with the key against the budget.
  void put(std::string key, std::shared_ptr<const V> value, size_t bytes) {
    bytes += key.size() + kOverhead;
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes > capacity_ || map_.count(key)) return;
    used_ += bytes;
    order_.push_back({std::move(key), std::move(value), bytes});
    auto last = std::prev(order_.end());
    map_.emplace(std::string_view(last->key), last);
    evict_locked();
  }

  void set_capacity(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = bytes;
    evict_locked();
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.size();
  }
  size_t bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return used_;
  }

 private:
  static constexpr size_t kOverhead = 96;  // list node, map node, control block
  struct Entry {
    std::string key;
    std::shared_ptr<const V> value;
    size_t bytes;
  };
  void evict_locked() {
    while (used_ > capacity_ && !order_.empty()) {
      used_ -= order_.front().bytes;
      map_.erase(order_.front().key);
      order_.pop_front();
    }
  }

  mutable std::mutex mutex_;
  std::list<Entry> order_;  // oldest first
  std::unordered_map<std::string_view, typename std::list<Entry>::iterator> map_;
  size_t capacity_;
  size_t used_ = 0;
};

}  // namespace cadenza::grammar
