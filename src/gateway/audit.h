// The gateway's audit log: one structured line on stderr per authentication failure (a client or
// admin key missing or refused) and per admin action, `audit {"event":...,...}` (JSON after the
// word `audit`, so a log shipper can pick the lines out).
//
// Contract: a key never reaches the log. Callers pass keys through key_fingerprint (the first 8
// hex digits of its SHA-256: enough to tell two keys apart in an incident, useless to an
// attacker), never the key itself.
// Thread-safety: audit_log may be called from any thread (spdlog).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace cadenza::gateway {

// The first 8 hex digits of sha256(key); "-" for an empty key.
std::string key_fingerprint(std::string_view key);

// Writes `audit {"event": event, ...fields}` at warning level (failures) or info (actions).
void audit_log(std::string_view event, nlohmann::ordered_json fields, bool failure);

}  // namespace cadenza::gateway
