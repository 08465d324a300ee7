// DiskTier: a KvTier of files in one directory (--kv-disk-dir, --kv-disk-size) that outlives the
// process: a restarted server over the same directory finds the blocks an earlier run stored.
//
// Content addressing: entry (model id M, block hash H) is the file
//   <dir>/<hex SHA-256(M || H)>.kvb
// where H is the chained block hash (block_hash.h: the whole token prefix and the cache salt) and
// M names everything else the bytes depend on (the engine derives it from the model file and the
// KV layout: engine/kv_tiers.cpp). Several models may share a directory.
//
// File format (little-endian), version 1:
//   0   8  magic "CDZKVBK1"
//   8   4  u32 format version (1)
//   12  4  u32 header size (152)
//   16  32 model id M
//   48  32 block hash H
//   80  8  u64 payload length
//   88  32 SHA-256 of the payload
//   120 32 SHA-256 of bytes [0, 120)
//   152 .. payload
// Nothing in a file is trusted before it is checked. open() reads every header once (magic,
// version, header checksum, model id, the name matching M and H, the length matching the block
// size and the file size); get() re-reads the header and checks the payload checksum before a byte
// reaches the pool. A truncated, damaged or foreign file is skipped with a log line; a damaged
// file of this model found by get() is deleted (it would only be skipped again). Writes go to a
// temporary name and are renamed into place, so a crash leaves no half-written .kvb file.
// Budget: whole file sizes (header + payload); LRU order survives restarts through the files'
// modification times (get() touches the file).
// Ownership: owns the files it indexes; leaves foreign ones alone. Thread-safety: none.
#pragma once

#include <cstdint>
#include <filesystem>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "kv/kv_tier.h"
#include "util/result.h"

namespace cadenza::kv {

inline constexpr size_t kDiskTierHeaderBytes = 152;

class DiskTier final : public KvTier {
 public:
  // Creates `dir` if needed and indexes the valid files of `model_id` with `block_bytes`-byte
  // payloads found there (oldest first; over the budget, the oldest are deleted). Errors: the
  // directory cannot be created or read, capacity_bytes < 0, block_bytes == 0.
  static Result<std::unique_ptr<DiskTier>> open(const std::filesystem::path& dir,
                                                int64_t capacity_bytes, const BlockHash& model_id,
                                                size_t block_bytes);

  std::string_view name() const override { return "disk"; }
  bool contains(const BlockHash& hash) const override { return index_.count(hash) != 0; }
  // `evicted` is not called: the disk is the last tier, its evictions delete files.
  bool put(const BlockHash& hash, std::span<const uint8_t> payload,
           const KvTierSink& evicted = {}) override;
  bool get(const BlockHash& hash, std::span<uint8_t> out) override;
  void erase(const BlockHash& hash) override;
  int64_t clear() override;
  void for_each_lru(const KvTierSink& fn) override;
  KvTierStats stats() const override;
  void count_promotion() override { ++stats_.promotions; }

  const std::filesystem::path& dir() const { return dir_; }
  // The file that holds (or would hold) `hash`.
  std::filesystem::path path_of(const BlockHash& hash) const;

 private:
  DiskTier() = default;
  struct Entry {
    BlockHash hash;
    int64_t file_bytes = 0;
  };
  void evict_front();
  void forget(std::list<Entry>::iterator it, bool remove_file);

  std::filesystem::path dir_;
  BlockHash model_id_;
  size_t block_bytes_ = 0;
  std::list<Entry> lru_;  // front: least recently used
  std::unordered_map<BlockHash, std::list<Entry>::iterator, BlockHashHasher> index_;
  KvTierStats stats_;
  int64_t write_failures_ = 0;
};

}  // namespace cadenza::kv
