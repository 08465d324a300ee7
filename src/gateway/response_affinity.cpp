#include "gateway/response_affinity.h"

#include <cctype>
#include <utility>

namespace cadenza::gateway {

void ResponseAffinity::remember(const std::string& id, ResponseHome home,
                                const std::string& tenant) {
  if (capacity_ == 0) return;
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    order_.erase(it->second.order);
    entries_.erase(it);
  }
  while (entries_.size() >= capacity_) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
  order_.push_back(id);
  entries_.emplace(id, Entry{std::move(home), tenant, std::prev(order_.end())});
}

std::optional<ResponseHome> ResponseAffinity::find(const std::string& id,
                                                   const std::string& tenant) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.tenant != tenant) return std::nullopt;
  return it->second.home;
}

void ResponseAffinity::forget(const std::string& id, const std::string& tenant) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.tenant != tenant) return;
  order_.erase(it->second.order);
  entries_.erase(it);
}

size_t ResponseAffinity::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

std::optional<std::string> find_response_id(std::string_view text) {
  // JSON as serve writes it (no spaces); `"id":"resp_` is unique to a response object there.
  constexpr std::string_view kKey = "\"id\":\"resp_";
  const size_t at = text.find(kKey);
  if (at == std::string_view::npos) return std::nullopt;
  const size_t begin = at + kKey.size() - 5;  // keep "resp_"
  size_t end = at + kKey.size();
  while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) ||
                               text[end] == '_' || text[end] == '-'))
    ++end;
  if (end >= text.size() || text[end] != '"' || end == at + kKey.size()) return std::nullopt;
  return std::string(text.substr(begin, end - begin));
}

}  // namespace cadenza::gateway
