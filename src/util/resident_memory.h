// Memory facts of this process and machine (Linux): the peak (VmHWM) and current (VmRSS)
// resident set, the memory available to new allocations (MemAvailable), and how much of a mapped
// range is resident (mincore). All in bytes; 0 where /proc or the call is unavailable.
// Thread-safety: pure reads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cadenza {

uint64_t peak_resident_bytes();
uint64_t current_resident_bytes();
// /proc/meminfo MemAvailable: what the kernel estimates new allocations can take without
// swapping (free memory plus reclaimable page cache).
uint64_t available_memory_bytes();
// Bytes of [data, data + size) whose pages are resident (a memory-mapped file's pages in the page
// cache and mapped here), by page.
uint64_t resident_bytes_of(const void* data, size_t size);

}  // namespace cadenza
