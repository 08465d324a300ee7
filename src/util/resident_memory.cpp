#include "util/resident_memory.h"

#include <fstream>
#include <string>

namespace cadenza {

namespace {

uint64_t status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

}  // namespace

uint64_t peak_resident_bytes() { return status_kib("VmHWM"); }
uint64_t current_resident_bytes() { return status_kib("VmRSS"); }

}  // namespace cadenza
