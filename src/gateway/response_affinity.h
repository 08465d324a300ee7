// ResponseAffinity: which replica holds a stored Responses API response. Each `cadenza serve
// --responses-store N` replica keeps its own responses, so a request that names one
// (`previous_response_id`) must reach the replica that answered the first; the gateway remembers
// the replica per response id as answers pass through (proxy.cpp) and pins such requests to it.
// Bounded: at most `capacity` ids, the least recently remembered forgotten first (a replica's
// own store is bounded too). The tenant that made a response is kept with it: another tenant's
// lookup finds nothing (the hidden-name rule, applied to response ids).
// GET/DELETE/cancel of a stored response (stored_responses.h) use the same record.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace cadenza::gateway {

// Where a stored response lives: the replica's address (Upstream::address()) and the model
// version whose replica it is (VersionPool::key(): its configuration holds the replica's key).
struct ResponseHome {
  std::string upstream;
  std::string version;
  bool operator==(const ResponseHome&) const = default;
};

class ResponseAffinity {
 public:
  explicit ResponseAffinity(size_t capacity = 65536) : capacity_(capacity) {}
  // `tenant`: "" without tenants.
  void remember(const std::string& id, ResponseHome home, const std::string& tenant);
  // Where `id` was stored for `tenant`, or nullopt.
  std::optional<ResponseHome> find(const std::string& id, const std::string& tenant) const;
  // Drops `id` (after its replica deleted it); another tenant's id is left alone.
  void forget(const std::string& id, const std::string& tenant);
  size_t size() const;

 private:
  struct Entry {
    ResponseHome home;
    std::string tenant;
    std::list<std::string>::iterator order;
  };
  const size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> order_;  // oldest first
};

// The id of the first Responses API response object in `text`: a non-streamed answer's body, or
// a stream's first events (`response.created` carries `"response":{"id":"resp_..."`). Ids are
// those `cadenza serve` makes (`resp_` then letters, digits, '_' or '-'); nullopt when none.
std::optional<std::string> find_response_id(std::string_view text);

}  // namespace cadenza::gateway
