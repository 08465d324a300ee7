// Content hashes of full KV blocks, chained so that a block's hash names its whole prefix.
//
// A block's KV depends on every token before it (attention mixes them in), so two blocks are
// interchangeable only when the entire prefix up to their end is identical. The hash therefore
// chains: hash(block i) = SHA-256(hash(block i-1) || token ids of block i), and block 0's parent
// is a root hash of the request's extra key (adapter / model id / cache salt), which separates
// otherwise identical prefixes computed under different weights or for different tenants.
//
// Why SHA-256 (OpenSSL libcrypto): a collision would silently hand one request another's KV,
// i.e. wrong output, and prompts are attacker-controlled in a server, so a fast non-cryptographic
// hash with a fixed seed invites crafted collisions (vLLM moved to SHA-256 for this reason). The
// cost is ~1 microsecond per 16-token block, paid once per block per request: negligible next to
// the forward pass that the hit saves.
//
// Byte encoding (stable: the disk KV tier's file names derive from these hashes, so a change
// orphans every file a disk tier holds; they are then never found and age out of its budget):
//   root  = SHA-256("cadenza.kv.v1" 0x00 || u64 LE length of extra key || extra key bytes)
//   block = SHA-256(parent digest (32 bytes) || each token id as i32 LE
//                   [|| per ContentSpan overlapping the block: begin - block start as i32 LE,
//                       end - block start as i32 LE, its 32-byte digest]])
// A block without content spans hashes exactly as before they existed. Within one engine every
// block has block_size tokens, so the spans' bytes cannot be mistaken for tokens.
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace cadenza::kv {

struct BlockHash {
  std::array<uint8_t, 32> bytes{};

  friend bool operator==(const BlockHash& a, const BlockHash& b) = default;
};

// For hash maps: the digest is already uniformly distributed, so its first word is a fine bucket key.
struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const {
    uint64_t w;
    std::memcpy(&w, h.bytes.data(), sizeof(w));
    return static_cast<size_t>(w);
  }
};

// SHA-256 of raw bytes (exposed for the known-answer test).
BlockHash sha256(std::span<const uint8_t> data);

// The parent of a request's first block.
BlockHash root_hash(std::string_view extra_key);

// The hash of a full block with tokens `tokens` whose predecessor has hash `parent`.
BlockHash chain_hash(const BlockHash& parent, std::span<const int32_t> tokens);

// Token positions [begin, end) of a request whose KV depends on more than their token ids (an
// image's embeddings at its placeholder tokens), and a digest of that content.
struct ContentSpan {
  int32_t begin = 0;
  int32_t end = 0;
  BlockHash digest;
};

// The same for the block starting at position `block_start`, mixing in every span of `spans`
// that overlaps it (with its offsets relative to the block: the same image one position later is
// other KV). No overlapping span: the same hash as the overload above.
BlockHash chain_hash(const BlockHash& parent, std::span<const int32_t> tokens, int32_t block_start,
                     std::span<const ContentSpan> spans);

}  // namespace cadenza::kv
