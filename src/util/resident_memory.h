// This process's resident memory, from /proc/self/status (Linux): the peak (VmHWM) and the
// current (VmRSS) resident set in bytes; 0 where the file or the field is missing.
#pragma once

#include <cstdint>

namespace cadenza {

uint64_t peak_resident_bytes();
uint64_t current_resident_bytes();

}  // namespace cadenza
