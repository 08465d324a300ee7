#include "util/resident_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace cadenza {

namespace {

// A "Field:   123 kB" line of a /proc file, in bytes.
uint64_t proc_kib(const char* path, const std::string& field) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

}  // namespace

uint64_t peak_resident_bytes() { return proc_kib("/proc/self/status", "VmHWM"); }
uint64_t current_resident_bytes() { return proc_kib("/proc/self/status", "VmRSS"); }
uint64_t available_memory_bytes() { return proc_kib("/proc/meminfo", "MemAvailable"); }

uint64_t resident_bytes_of(const void* data, size_t size) {
  if (data == nullptr || size == 0) return 0;
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (page_size <= 0) return 0;
  const auto page = static_cast<uintptr_t>(page_size);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + size;
  const size_t pages = (end - begin + page - 1) / page;
  // In slices, so that the vector stays small for a file of hundreds of GB.
  constexpr size_t kSlice = size_t{1} << 18;
  std::vector<unsigned char> resident(std::min(pages, kSlice));
  uint64_t count = 0;
  for (size_t first = 0; first < pages; first += kSlice) {
    const size_t n = std::min(kSlice, pages - first);
    if (::mincore(reinterpret_cast<void*>(begin + first * page), n * page, resident.data()) != 0) {
      return 0;
    }
    for (size_t i = 0; i < n; ++i) count += resident[i] & 1;
  }
  return count * page;
}

}  // namespace cadenza
