// MappedFile: a read-only memory mapping of a whole file.
// Ownership: the mapping lives as long as the MappedFile; views into it must not outlive it.
// Thread-safety: immutable after open(); safe to read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "util/result.h"

namespace cadenza {

class MappedFile {
 public:
  // Maps `path` read-only. Errors name the path and the OS reason.
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

  // Drops this process's resident pages of [data, data + size) (the whole pages inside it) after
  // the caller copied what it needs out of them: they stop counting toward its resident memory
  // and are read from the file again if touched later. Any read-only mapping; no-op for memory
  // that is not a mapping's.
  static void release_pages(const void* data, size_t size);
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace cadenza
