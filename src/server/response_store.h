// ResponseStore: a bounded in-memory LRU of finished Responses API responses (`cadenza serve
// --responses-store N`), so that previous_response_id continues a conversation and GET/DELETE
// /v1/responses/{id} work. Each entry keeps the response object and the conversation it ended
// (input items, the previous ones included, then the output items): a continuation's input is
// that conversation followed by the new input. Entries are dropped least recently used first
// when more than `capacity` are kept; nothing survives a restart.
// Thread-safety: every method locks; any I/O thread may call it.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace cadenza::server {

class ResponseStore {
 public:
  struct Entry {
    nlohmann::ordered_json response;  // the response object as returned
    nlohmann::ordered_json items;     // the conversation: input items, then output items
  };
  explicit ResponseStore(size_t capacity) : capacity_(capacity) {}
  size_t capacity() const { return capacity_; }
  // Adds or replaces `id` (the most recently used), evicting beyond the capacity.
  void put(const std::string& id, Entry e);
  // A copy of the entry (it becomes the most recently used), or nullopt.
  std::optional<Entry> get(const std::string& id);
  // Removes `id`; whether it was there.
  bool erase(const std::string& id);
  size_t size() const;

 private:
  using Order = std::list<std::string>;  // front: most recently used
  struct Slot {
    Entry entry;
    Order::iterator pos;
  };
  size_t capacity_;
  mutable std::mutex mu_;
  Order order_;
  std::unordered_map<std::string, Slot> map_;
};

}  // namespace cadenza::server
