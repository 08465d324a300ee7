#include "kv/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include <spdlog/spdlog.h>

namespace cadenza::kv {

namespace {

constexpr std::array<char, 8> kMagic = {'C', 'D', 'Z', 'K', 'V', 'B', 'K', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBody = 120;  // bytes covered by the header checksum
constexpr const char* kSuffix = ".kvb";
// Per reason, the first files skipped at open() are logged one by one; then only a total.
constexpr int kLoggedSkips = 5;

std::string hex(const BlockHash& h) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < 32; ++i) {
    s[2 * i] = kDigits[h.bytes[i] >> 4];
    s[2 * i + 1] = kDigits[h.bytes[i] & 15];
  }
  return s;
}

BlockHash file_key(const BlockHash& model_id, const BlockHash& hash) {
  std::array<uint8_t, 64> buf;
  std::memcpy(buf.data(), model_id.bytes.data(), 32);
  std::memcpy(buf.data() + 32, hash.bytes.data(), 32);
  return sha256(buf);
}

template <typename T>
void put_le(uint8_t* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
}
template <typename T>
T get_le(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

std::array<uint8_t, kDiskTierHeaderBytes> make_header(const BlockHash& model_id, const BlockHash& hash,
                                                      std::span<const uint8_t> payload) {
  std::array<uint8_t, kDiskTierHeaderBytes> h{};
  std::memcpy(h.data(), kMagic.data(), kMagic.size());
  put_le<uint32_t>(h.data() + 8, kVersion);
  put_le<uint32_t>(h.data() + 12, static_cast<uint32_t>(kDiskTierHeaderBytes));
  std::memcpy(h.data() + 16, model_id.bytes.data(), 32);
  std::memcpy(h.data() + 48, hash.bytes.data(), 32);
  put_le<uint64_t>(h.data() + 80, payload.size());
  const BlockHash sum = sha256(payload);
  std::memcpy(h.data() + 88, sum.bytes.data(), 32);
  const BlockHash head = sha256(std::span<const uint8_t>(h.data(), kHeaderBody));
  std::memcpy(h.data() + kHeaderBody, head.bytes.data(), 32);
  return h;
}

enum class Check { kOk, kDamaged, kForeign };

struct Header {
  BlockHash hash;
  BlockHash payload_sum;
  uint64_t length = 0;
};

// Checks a header read from a file of `file_bytes` bytes; `why` says what is wrong.
Check check_header(std::span<const uint8_t> h, uint64_t file_bytes, const BlockHash& model_id,
                   size_t block_bytes, Header& out, std::string& why) {
  if (h.size() < kDiskTierHeaderBytes) {
    why = "truncated header";
    return Check::kDamaged;
  }
  if (std::memcmp(h.data(), kMagic.data(), kMagic.size()) != 0) {
    why = "bad magic";
    return Check::kDamaged;
  }
  if (get_le<uint32_t>(h.data() + 8) != kVersion || get_le<uint32_t>(h.data() + 12) != kDiskTierHeaderBytes) {
    why = "unknown format version";
    return Check::kForeign;
  }
  const BlockHash head = sha256(h.subspan(0, kHeaderBody));
  if (std::memcmp(head.bytes.data(), h.data() + kHeaderBody, 32) != 0) {
    why = "header checksum mismatch";
    return Check::kDamaged;
  }
  if (std::memcmp(h.data() + 16, model_id.bytes.data(), 32) != 0) {
    why = "another model's block";
    return Check::kForeign;
  }
  std::memcpy(out.hash.bytes.data(), h.data() + 48, 32);
  std::memcpy(out.payload_sum.bytes.data(), h.data() + 88, 32);
  out.length = get_le<uint64_t>(h.data() + 80);
  if (out.length != block_bytes) {
    why = "payload length differs from the block size";
    return Check::kDamaged;
  }
  if (file_bytes != kDiskTierHeaderBytes + out.length) {
    why = file_bytes < kDiskTierHeaderBytes + out.length ? "truncated payload" : "trailing bytes";
    return Check::kDamaged;
  }
  return Check::kOk;
}

// Reads exactly out.size() bytes from `fd` at `offset`; false on a short read or error.
bool read_exact(int fd, std::span<uint8_t> out, off_t offset) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool write_exact(int fd, std::span<const uint8_t> in) {
  size_t done = 0;
  while (done < in.size()) {
    const ssize_t n = ::write(fd, in.data() + done, in.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

}  // namespace

std::filesystem::path DiskTier::path_of(const BlockHash& hash) const {
  return dir_ / (hex(file_key(model_id_, hash)) + kSuffix);
}

Result<std::unique_ptr<DiskTier>> DiskTier::open(const std::filesystem::path& dir,
                                                 int64_t capacity_bytes, const BlockHash& model_id,
                                                 size_t block_bytes) {
  if (capacity_bytes < 0) return make_error("kv disk tier: negative size {}", capacity_bytes);
  if (block_bytes == 0) return make_error("kv disk tier: zero block size");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error("kv disk tier: cannot create {}: {}", dir.string(), ec.message());
  if (!std::filesystem::is_directory(dir, ec)) {
    return make_error("kv disk tier: {} is not a directory", dir.string());
  }
  std::unique_ptr<DiskTier> t(new DiskTier());
  t->dir_ = dir;
  t->model_id_ = model_id;
  t->block_bytes_ = block_bytes;
  t->stats_.capacity_bytes = capacity_bytes;

  struct Found {
    BlockHash hash;
    int64_t bytes;
    int64_t mtime_ns;
  };
  std::vector<Found> found;
  int damaged = 0, foreign = 0;
  std::filesystem::directory_iterator it(dir, ec), end;
  if (ec) return make_error("kv disk tier: cannot read {}: {}", dir.string(), ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return make_error("kv disk tier: cannot read {}: {}", dir.string(), ec.message());
    const std::filesystem::path& p = it->path();
    if (p.extension() != kSuffix) continue;
    Fd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (fd.fd < 0 || ::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    std::array<uint8_t, kDiskTierHeaderBytes> head{};
    const size_t n = std::min<size_t>(head.size(), static_cast<size_t>(st.st_size));
    Header h;
    std::string why;
    Check c = read_exact(fd.fd, std::span<uint8_t>(head.data(), n), 0)
                  ? check_header(std::span<const uint8_t>(head.data(), n), static_cast<uint64_t>(st.st_size),
                                 model_id, block_bytes, h, why)
                  : (why = "unreadable", Check::kDamaged);
    if (c == Check::kOk && p.filename() != t->path_of(h.hash).filename()) {
      why = "file name does not match its content address";
      c = Check::kDamaged;
    }
    if (c != Check::kOk) {
      int& count = c == Check::kForeign ? foreign : damaged;
      if (++count <= kLoggedSkips) spdlog::warn("kv disk tier: skipping {}: {}", p.string(), why);
      ++t->stats_.rejected;
      continue;
    }
    found.push_back({h.hash, static_cast<int64_t>(st.st_size),
                     static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  if (damaged + foreign > 0) {
    spdlog::warn("kv disk tier: {}: skipped {} damaged or truncated and {} foreign files",
                 dir.string(), damaged, foreign);
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const Found& a, const Found& b) { return a.mtime_ns < b.mtime_ns; });
  for (const Found& f : found) {
    if (t->index_.count(f.hash)) continue;
    t->lru_.push_back(Entry{f.hash, f.bytes});
    t->index_.emplace(f.hash, std::prev(t->lru_.end()));
    t->stats_.bytes += f.bytes;
  }
  while (t->stats_.bytes > capacity_bytes && !t->lru_.empty()) t->evict_front();
  spdlog::info("kv disk tier: {}: {} blocks ({} bytes of {}) of this model", dir.string(),
               t->index_.size(), t->stats_.bytes, capacity_bytes);
  return t;
}

void DiskTier::forget(std::list<Entry>::iterator it, bool remove_file) {
  if (remove_file) {
    std::error_code ec;
    std::filesystem::remove(path_of(it->hash), ec);
  }
  stats_.bytes -= it->file_bytes;
  index_.erase(it->hash);
  lru_.erase(it);
}

void DiskTier::evict_front() {
  ++stats_.evictions;
  forget(lru_.begin(), true);
}

bool DiskTier::put(const BlockHash& hash, std::span<const uint8_t> payload, const KvTierSink&) {
  if (auto it = index_.find(hash); it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second);
    return true;
  }
  const auto file_bytes = static_cast<int64_t>(kDiskTierHeaderBytes + payload.size());
  if (payload.size() != block_bytes_ || file_bytes > stats_.capacity_bytes) return false;
  while (stats_.bytes + file_bytes > stats_.capacity_bytes) evict_front();

  const std::filesystem::path final_path = path_of(hash);
  std::filesystem::path tmp = final_path;
  tmp += ".tmp";
  const auto header = make_header(model_id_, hash, payload);
  bool ok = false;
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    ok = fd.fd >= 0 && write_exact(fd.fd, header) && write_exact(fd.fd, payload);
  }
  std::error_code ec;
  if (ok) {
    std::filesystem::rename(tmp, final_path, ec);
    ok = !ec;
  }
  if (!ok) {
    const int err = errno;
    std::filesystem::remove(tmp, ec);
    if (++write_failures_ <= kLoggedSkips) {
      spdlog::warn("kv disk tier: cannot write {}: {}", final_path.string(), std::strerror(err));
    }
    return false;
  }
  lru_.push_back(Entry{hash, file_bytes});
  index_.emplace(hash, std::prev(lru_.end()));
  stats_.bytes += file_bytes;
  ++stats_.demotions;
  return true;
}

bool DiskTier::get(const BlockHash& hash, std::span<uint8_t> out) {
  auto it = index_.find(hash);
  if (it == index_.end() || out.size() != block_bytes_) return false;
  const std::filesystem::path p = path_of(hash);
  std::string why;
  {
    Fd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    std::array<uint8_t, kDiskTierHeaderBytes> head{};
    Header h;
    if (fd.fd < 0 || ::fstat(fd.fd, &st) != 0) {
      why = "cannot open";
    } else if (!read_exact(fd.fd, head, 0)) {
      why = "truncated header";
    } else if (check_header(head, static_cast<uint64_t>(st.st_size), model_id_, block_bytes_, h, why) !=
               Check::kOk) {
      // why is set
    } else if (!(h.hash == hash)) {
      why = "block hash differs from its name";
    } else if (!read_exact(fd.fd, out, static_cast<off_t>(kDiskTierHeaderBytes))) {
      why = "truncated payload";
    } else if (!(sha256(out) == h.payload_sum)) {
      why = "payload checksum mismatch";
    } else {
      ::futimens(fd.fd, nullptr);  // LRU order for the next run
      lru_.splice(lru_.end(), lru_, it->second);
      ++stats_.hits;
      return true;
    }
  }
  spdlog::warn("kv disk tier: skipping {}: {} (deleted)", p.string(), why);
  ++stats_.rejected;
  forget(it->second, true);
  return false;
}

void DiskTier::erase(const BlockHash& hash) {
  if (auto it = index_.find(hash); it != index_.end()) forget(it->second, true);
}

int64_t DiskTier::clear() {
  const int64_t freed = stats_.bytes;
  while (!lru_.empty()) forget(lru_.begin(), true);
  return freed;
}

void DiskTier::for_each_lru(const KvTierSink& fn) {
  std::vector<uint8_t> buf(block_bytes_);
  std::vector<BlockHash> hashes;
  for (const Entry& e : lru_) hashes.push_back(e.hash);
  for (const BlockHash& h : hashes)
    if (get(h, buf)) fn(h, buf);
}

KvTierStats DiskTier::stats() const {
  KvTierStats s = stats_;
  s.blocks = static_cast<int64_t>(index_.size());
  return s;
}

}  // namespace cadenza::kv
