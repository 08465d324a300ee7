#include "gateway/audit.h"

#include <spdlog/spdlog.h>

#include "gateway/hashing.h"

namespace cadenza::gateway {

std::string key_fingerprint(std::string_view key) {
  if (key.empty()) return "-";
  return sha256_hex(key).substr(0, 8);
}

void audit_log(std::string_view event, nlohmann::ordered_json fields, bool failure) {
  nlohmann::ordered_json line;
  line["event"] = std::string(event);
  for (auto& [k, v] : fields.items()) line[k] = std::move(v);
  const std::string text =
      "audit " + line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  if (failure)
    spdlog::warn("{}", text);
  else
    spdlog::info("{}", text);
}

}  // namespace cadenza::gateway
