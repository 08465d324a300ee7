#include "server/auth.h"

#include <algorithm>
#include <cctype>

namespace cadenza::server {

ApiKeys::ApiKeys(std::vector<std::string> keys) : keys_(std::move(keys)) {
  std::erase_if(keys_, [](const std::string& k) { return k.empty(); });
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

bool ApiKeys::check(std::string_view authorization) const {
  if (keys_.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() < kBearer.size()) return false;
  // The scheme is case-insensitive (RFC 7235).
  for (size_t i = 0; i < kBearer.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
        std::tolower(static_cast<unsigned char>(kBearer[i])))
      return false;
  return check_key(authorization.substr(kBearer.size()));
}

bool ApiKeys::check_key(std::string_view key) const {
  if (keys_.empty()) return true;
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
  if (key.empty()) return false;
  bool ok = false;
  for (const auto& k : keys_) ok |= constant_time_equal(key, k);  // no early exit
  return ok;
}

}  // namespace cadenza::server
