#include "util/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cadenza {

namespace {
// The live mappings, by start address: [start, start + size) maps file `fd` from offset 0.
struct Mapping {
  size_t size;
  int fd;
};
// Both live for the whole process and are never destroyed: a MappedFile held by a static object
// (a cached vocabulary, a test fixture) may be destroyed after function-local statics are, and
// its destructor still erases its entry.
std::mutex& registry_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<uintptr_t, Mapping>& registry() {
  static auto* r = new std::map<uintptr_t, Mapping>;
  return *r;
}
}  // namespace

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return make_error("{}: cannot stat: {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error("{}: not a regular file", path);
  }
  auto file = std::unique_ptr<MappedFile>(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return make_error("{}: cannot mmap {} bytes: {}", path, file->size_, std::strerror(e));
    }
    file->data_ = static_cast<const uint8_t*>(p);
    file->fd_ = fd;  // kept open for read_at
    std::lock_guard lock(registry_mutex());
    registry()[reinterpret_cast<uintptr_t>(p)] = {file->size_, fd};
  } else {
    ::close(fd);
  }
  return file;
}

std::optional<MappedFile::Source> MappedFile::source_of(const void* data) {
  const auto p = reinterpret_cast<uintptr_t>(data);
  std::lock_guard lock(registry_mutex());
  auto it = registry().upper_bound(p);
  if (it == registry().begin()) return std::nullopt;
  --it;
  if (p - it->first >= it->second.size) return std::nullopt;
  return Source{it->second.fd, static_cast<uint64_t>(p - it->first)};
}

bool MappedFile::read_at(const Source& source, uint64_t offset, void* dst, size_t size) {
  auto* out = static_cast<uint8_t*>(dst);
  while (size > 0) {
    const ssize_t n = ::pread(source.fd, out, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    out += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
  return true;
}

size_t MappedFile::release_pages(const void* data, size_t size) {
  static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + size) / page * page;
  if (last <= first) return 0;
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;
  return last - first;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) {
    {
      std::lock_guard lock(registry_mutex());
      registry().erase(reinterpret_cast<uintptr_t>(data_));
    }
    ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace cadenza
