// Open-addressing hash indexes for the tokenizer's hot lookups: token text -> id (every SPM
// bigram, every BPE ignore_merges probe) and (left id, right id) -> merge (every BPE pair).
// std::unordered_map chases a heap node per probe; here a probe touches one slot array, and
// for text keys a stored hash fragment avoids most string comparisons on misses. Encoding the
// 300 KB held-out text with a SentencePiece vocabulary was dominated by those node chases.
//
// Both are built once and then only read (safe for concurrent lookups).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cadenza::tok {

inline uint64_t mix64(uint64_t x) {  // splitmix64 finalizer: a strong, cheap integer mix
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// FNV-1a, then mixed (token texts are short). Incrementally: h = kFnvBasis, h = fnv_add(h, c)
// per byte, and hash_text == mix64(h) (Unigram's lattice extends prefixes byte by byte).
inline constexpr uint64_t kFnvBasis = 0xCBF29CE484222325ull;
inline uint64_t fnv_add(uint64_t h, char c) {
  return (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
}
inline uint64_t hash_text(std::string_view s) {
  uint64_t h = kFnvBasis;
  for (char c : s) h = fnv_add(h, c);
  return mix64(h);
}

inline size_t table_capacity(size_t n) {  // power of two, load factor <= 1/2
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  return cap;
}

// Token text -> id over a vector of texts it does not own (passed to every call, so the owner
// may be moved freely).
class TextIndex {
 public:
  // Returns the id already holding `texts[id]`'s text, or -1 after inserting it.
  int32_t insert(const std::vector<std::string>& texts, int32_t id) {
    if (2 * (count_ + 1) > slots_.size()) grow(texts);
    const uint64_t h = hash_text(texts[id]);
    const int32_t found = probe(texts, texts[id], h);
    if (found >= 0) return found;
    place(h, id);
    ++count_;
    return -1;
  }

  int32_t find(const std::vector<std::string>& texts, std::string_view text) const {
    if (slots_.empty()) return -1;
    return probe(texts, text, hash_text(text));
  }
  // As find(), with hash == hash_text(text) already computed.
  int32_t find_hashed(const std::vector<std::string>& texts, std::string_view text,
                      uint64_t hash) const {
    if (slots_.empty()) return -1;
    return probe(texts, text, hash);
  }

 private:
  // A slot: high 32 bits a hash fragment, low 32 bits id + 1 (0: empty).
  int32_t probe(const std::vector<std::string>& texts, std::string_view text, uint64_t h) const {
    const size_t mask = slots_.size() - 1;
    const auto frag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const uint64_t s = slots_[i];
      if (s == 0) return -1;
      if (static_cast<uint32_t>(s >> 32) == frag) {
        const auto id = static_cast<int32_t>(static_cast<uint32_t>(s) - 1);
        if (texts[id] == text) return id;
      }
    }
  }
  void place(uint64_t h, int32_t id) {
    const size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = (h & 0xFFFFFFFF00000000ull) | (static_cast<uint64_t>(id) + 1);
  }
  void grow(const std::vector<std::string>& texts) {
    std::vector<uint64_t> old;
    old.swap(slots_);
    slots_.assign(table_capacity(count_ + 1 + count_ / 2), 0);
    for (uint64_t s : old) {
      if (s == 0) continue;
      const auto id = static_cast<int32_t>(static_cast<uint32_t>(s) - 1);
      place(hash_text(texts[id]), id);
    }
  }

  std::vector<uint64_t> slots_;
  size_t count_ = 0;
};

// A set of 64-bit hashes (open addressing; 0 is stored as 1). Membership is exact for the hashes,
// so a caller using it for texts accepts rare false positives.
class HashSet {
 public:
  void insert(uint64_t h) {
    h = h == 0 ? 1 : h;
    if (2 * (count_ + 1) > slots_.size()) grow();
    if (place(slots_, h)) ++count_;
  }
  bool contains(uint64_t h) const {
    if (slots_.empty()) return false;
    h = h == 0 ? 1 : h;
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      if (slots_[i] == h) return true;
      if (slots_[i] == 0) return false;
    }
  }
  size_t size() const { return count_; }

 private:
  static bool place(std::vector<uint64_t>& slots, uint64_t h) {  // false: already present
    const size_t mask = slots.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      if (slots[i] == h) return false;
      if (slots[i] == 0) {
        slots[i] = h;
        return true;
      }
    }
  }
  void grow() {
    std::vector<uint64_t> next(table_capacity(count_ + 1 + count_ / 2), 0);
    for (uint64_t s : slots_) {
      if (s != 0) place(next, s);
    }
    slots_.swap(next);
  }
  std::vector<uint64_t> slots_;
  size_t count_ = 0;
};

// (left, right) token pair -> value, for non-negative ids. The first insertion of a key wins.
template <typename Value>
class PairIndex {
 public:
  void reserve(size_t n) { rehash(table_capacity(n)); }

  void insert(int32_t left, int32_t right, const Value& v) {
    if (2 * (count_ + 1) > keys_.size()) rehash(table_capacity(count_ + 1 + count_ / 2));
    const uint64_t k = key(left, right);
    const size_t mask = keys_.size() - 1;
    for (size_t i = mix64(k) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == k) return;
      if (keys_[i] == kEmpty) {
        keys_[i] = k;
        values_[i] = v;
        ++count_;
        return;
      }
    }
  }

  const Value* find(int32_t left, int32_t right) const {
    if (keys_.empty()) return nullptr;
    const uint64_t k = key(left, right);
    const size_t mask = keys_.size() - 1;
    for (size_t i = mix64(k) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == k) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

  size_t size() const { return count_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;  // never a key: ids are non-negative
  static uint64_t key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  void rehash(size_t cap) {
    if (cap <= keys_.size()) return;
    std::vector<uint64_t> old_keys(cap, kEmpty);
    std::vector<Value> old_values(cap);
    old_keys.swap(keys_);
    old_values.swap(values_);
    count_ = 0;
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != kEmpty) {
        insert(static_cast<int32_t>(old_keys[i] >> 32),
               static_cast<int32_t>(static_cast<uint32_t>(old_keys[i])), old_values[i]);
      }
    }
  }

  std::vector<uint64_t> keys_;
  std::vector<Value> values_;
  size_t count_ = 0;
};

}  // namespace cadenza::tok
