// API-key check for `Authorization: Bearer KEY` (or `x-api-key: KEY`, Anthropic's header). Keys are compared in constant time (the time
// depends on the lengths only, never on where the first difference is), against every key.
// Thread-safety: immutable after construction; check() may run on any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cadenza::server {

class ApiKeys {
 public:
  ApiKeys() = default;
  explicit ApiKeys(std::vector<std::string> keys);
  bool enabled() const { return !keys_.empty(); }
  // True when no keys are configured, or `authorization` is "Bearer K" with K a configured key.
  bool check(std::string_view authorization) const;
  // True when no keys are configured, or `key` (Anthropic's `x-api-key` header) is one.
  bool check_key(std::string_view key) const;

 private:
  std::vector<std::string> keys_;
};

// Equal contents, in time that depends on the lengths only.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace cadenza::server
