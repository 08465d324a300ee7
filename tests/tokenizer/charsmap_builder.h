// Builds a SentencePiece precompiled charsmap (a darts-clone double-array trie of byte keys plus
// NUL-terminated replacements; format in src/tokenizer/sp_normalizer.h) for the Unigram tests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cadenza::test {

inline std::vector<uint8_t> build_charsmap(const std::map<std::string, std::string>& rules) {
  // The replacements blob and each key's value (its replacement's offset).
  std::string blob;
  struct Node {
    std::map<uint8_t, int> children;
    int32_t value = -1;  // >= 0: a key ends here
  };
  std::vector<Node> trie(1);
  for (const auto& [key, replacement] : rules) {
    int node = 0;
    for (unsigned char c : key) {
      auto it = trie[node].children.find(c);
      if (it == trie[node].children.end()) {
        trie.push_back({});
        it = trie[node].children.emplace(c, static_cast<int>(trie.size() - 1)).first;
      }
      node = it->second;
    }
    trie[node].value = static_cast<int32_t>(blob.size());
    blob += replacement;
    blob.push_back('\0');
  }
  // Place nodes: unit index of each node; a node's children sit at base ^ label, its leaf value
  // at base ^ 0; the node's unit stores offset = index ^ base.
  std::vector<uint32_t> units(1, 0);
  std::vector<bool> used(1, true);
  auto ensure = [&](size_t n) {
    if (units.size() < n) {
      units.resize(n, 0);
      used.resize(n, false);
    }
  };
  std::vector<size_t> index(trie.size(), 0);
  std::vector<int> queue{0};
  for (size_t q = 0; q < queue.size(); ++q) {
    const int node = queue[q];
    const Node& t = trie[node];
    std::vector<uint32_t> labels;
    if (t.value >= 0) labels.push_back(0);
    for (const auto& [c, child] : t.children) labels.push_back(c);
    if (labels.empty()) continue;
    uint32_t base = 1;
    for (;; ++base) {
      bool ok = base != index[node];
      for (uint32_t l : labels) {
        ensure((base ^ l) + 1);
        ok = ok && !used[base ^ l];
      }
      if (ok) break;
    }
    const uint32_t offset = static_cast<uint32_t>(index[node]) ^ base;
    units[index[node]] |= offset << 10;
    if (t.value >= 0) {
      units[index[node]] |= 1u << 8;  // has a leaf
      used[base] = true;
      units[base] = 0x80000000u | static_cast<uint32_t>(t.value);
    }
    for (const auto& [c, child] : t.children) {
      index[child] = base ^ c;
      used[base ^ c] = true;
      units[base ^ c] = c;  // the label; the offset is filled when the child is placed
      queue.push_back(child);
    }
  }
  std::vector<uint8_t> out;
  const auto trie_bytes = static_cast<uint32_t>(units.size() * 4);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(trie_bytes >> (8 * i)));
  for (uint32_t u : units) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(u >> (8 * i)));
  }
  out.insert(out.end(), blob.begin(), blob.end());
  return out;
}

}  // namespace cadenza::test
