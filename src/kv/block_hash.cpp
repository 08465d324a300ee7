#include "kv/block_hash.h"

#include <vector>

#include <openssl/sha.h>

namespace cadenza::kv {

BlockHash sha256(std::span<const uint8_t> data) {
  BlockHash h;
  SHA256(data.data(), data.size(), h.bytes.data());
  return h;
}

namespace {

void append_le(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

BlockHash root_hash(std::string_view extra_key) {
  constexpr std::string_view kDomain = "cadenza.kv.v1";
  std::vector<uint8_t> buf;
  buf.reserve(kDomain.size() + 1 + 8 + extra_key.size());
  buf.insert(buf.end(), kDomain.begin(), kDomain.end());
  buf.push_back(0);
  // Length-prefixed so that no extra key is a prefix-extension of another's encoding.
  append_le(buf, extra_key.size(), 8);
  buf.insert(buf.end(), extra_key.begin(), extra_key.end());
  return sha256(buf);
}

BlockHash chain_hash(const BlockHash& parent, std::span<const int32_t> tokens) {
  return chain_hash(parent, tokens, 0, {});
}

BlockHash chain_hash(const BlockHash& parent, std::span<const int32_t> tokens, int32_t block_start,
                     std::span<const ContentSpan> spans) {
  // Explicit little-endian bytes, not a memcpy of the ints, so the digest is host-independent.
  std::vector<uint8_t> buf;
  buf.reserve(parent.bytes.size() + tokens.size() * 4);
  buf.insert(buf.end(), parent.bytes.begin(), parent.bytes.end());
  for (int32_t t : tokens) append_le(buf, static_cast<uint32_t>(t), 4);
  const int64_t block_end = static_cast<int64_t>(block_start) + static_cast<int64_t>(tokens.size());
  for (const ContentSpan& s : spans) {
    if (s.end <= block_start || s.begin >= block_end) continue;
    append_le(buf, static_cast<uint32_t>(s.begin - block_start), 4);
    append_le(buf, static_cast<uint32_t>(s.end - block_start), 4);
    buf.insert(buf.end(), s.digest.bytes.begin(), s.digest.bytes.end());
  }
  return sha256(buf);
}

}  // namespace cadenza::kv
