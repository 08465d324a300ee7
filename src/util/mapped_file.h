// MappedFile: a read-only memory mapping of a whole file.
// Ownership: the mapping lives as long as the MappedFile; views into it must not outlive it.
// Thread-safety: immutable after open(); safe to read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
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
  // that is not a mapping's. Returns the bytes of those whole pages (0 when the call failed).
  static size_t release_pages(const void* data, size_t size);
  const std::string& path() const { return path_; }

  // Where a byte of a live MappedFile's mapping comes from: the file (held open as long as the
  // MappedFile lives) and the offset in it. nullopt for memory that is no MappedFile's.
  struct Source {
    int fd = -1;
    uint64_t offset = 0;
  };
  static std::optional<Source> source_of(const void* data);
  // Reads `size` bytes of the file at `offset` into dst with pread, which copies from the page
  // cache without mapping pages into this process: for bytes whose pages release_pages dropped
  // (reading them through the mapping would map back the file's pages around each access, up to
  // a whole large folio per touch). False on an I/O error.
  static bool read_at(const Source& source, uint64_t offset, void* dst, size_t size);

 private:
  MappedFile() = default;
  int fd_ = -1;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace cadenza
