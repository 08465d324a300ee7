// Hashes used by the gateway. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cadenza::gateway {

// Lower-case hex SHA-256 of `data` (OpenSSL). API keys are stored this way in the config.
std::string sha256_hex(std::string_view data);

// A fast, stable 64-bit hash (FNV-1a with a murmur3 finalizer): the same on every platform and
// run, so the hash ring (and thus prefix affinity) is stable across gateway restarts and replicas.
uint64_t hash64(std::string_view data);

}  // namespace cadenza::gateway
