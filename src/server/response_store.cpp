#include "server/response_store.h"

namespace cadenza::server {

void ResponseStore::put(const std::string& id, Entry e) {
  if (capacity_ == 0) return;
  std::lock_guard lock(mu_);
  if (auto it = map_.find(id); it != map_.end()) {
    order_.erase(it->second.pos);
    map_.erase(it);
  }
  order_.push_front(id);
  map_.emplace(id, Slot{std::move(e), order_.begin()});
  while (map_.size() > capacity_) {
    map_.erase(order_.back());
    order_.pop_back();
  }
}

std::optional<ResponseStore::Entry> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = map_.find(id);
  if (it == map_.end()) return std::nullopt;
  order_.splice(order_.begin(), order_, it->second.pos);
  return it->second.entry;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = map_.find(id);
  if (it == map_.end()) return false;
  order_.erase(it->second.pos);
  map_.erase(it);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}

}  // namespace cadenza::server
