// SHA-256 of files (OpenSSL's EVP digest) as lower-case hex, and the check for a hex digest.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "util/result.h"

namespace cadenza::hub {

// 64 lower-case hex digits. Errors: the file cannot be read.
Result<std::string> sha256_file(const std::string& path);

// `s` (quotes and a weak "W/" prefix removed, lower-cased) when it is 64 hex digits, else "".
std::string as_sha256(std::string_view s);

}  // namespace cadenza::hub
