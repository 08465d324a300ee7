// TokenIndex: the vocabulary as the grammar matcher needs it: each token's bytes, which tokens
// are special (matched only by token terminals, never by text), which end generation, and a
// byte trie of the normal tokens for computing next-token masks.
//
// The trie is stored in depth-first preorder in flat arrays: node i's subtree is the range
// [i, subtree_end(i)), children are in increasing byte order, so a mask walk is a forward scan
// that skips a subtree by jumping to subtree_end. Node 0 is the root (the empty prefix).
//
// Ownership: built once per model and shared by every compiled grammar of that model through
// shared_ptr<const TokenIndex>. Thread-safety: immutable after build(); all methods are const and
// may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cadenza {
class Tokenizer;
}

namespace cadenza::grammar {

class TokenIndex {
 public:
  // token_bytes[i]: the bytes token i stands for (byte-level BPE already decoded). is_special[i]
  // (same length, or empty for none): a control token, whose bytes are never matched by text.
  // eog_ids: end-of-generation ids (out-of-range ids are ignored). special_text[i] (same length,
  // or empty): the spelling a grammar's <...> terminal names the token by; only consulted for
  // special tokens (a normal token is named by its bytes). Normal tokens with no bytes, and eog
  // ids, are left out of the trie: an empty token would not advance the grammar, and an eog id
  // ends generation (allowed where the grammar can end, or by a token terminal), never as text.
  static std::shared_ptr<const TokenIndex> build(std::vector<std::string> token_bytes,
                                                 std::vector<uint8_t> is_special,
                                                 std::vector<int32_t> eog_ids,
                                                 std::vector<std::string> special_text);

  // From a loaded tokenizer (token_index_tokenizer.cpp): token_piece(id, false) as the bytes of
  // normal tokens, is_control() as special, is_end_of_generation() as eog, and
  // token_piece(id, true) as the special text.
  static std::shared_ptr<const TokenIndex> from_tokenizer(const Tokenizer& tokenizer);

  int32_t n_vocab() const { return static_cast<int32_t>(offsets_.size()) - 1; }
  // Words of a next-token bitmask: (n_vocab + 31) / 32.
  size_t mask_words() const { return (static_cast<size_t>(n_vocab()) + 31) / 32; }

  std::string_view token_bytes(int32_t id) const {
    return std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
  }
  bool is_special(int32_t id) const { return special_[id] != 0; }
  bool is_eog(int32_t id) const { return eog_[id] != 0; }
  std::span<const int32_t> eog_ids() const { return eog_ids_; }

  // The token a <spelling> terminal names: a special token whose special text is exactly
  // `spelling`, else a normal token whose bytes are exactly `spelling`; the lowest such id.
  std::optional<int32_t> find_by_text(std::string_view spelling) const;

  // --- the trie (preorder, see above) ---
  int32_t trie_size() const { return static_cast<int32_t>(node_byte_.size()); }
  uint8_t node_byte(int32_t node) const { return node_byte_[node]; }       // unused for root
  int32_t node_depth(int32_t node) const { return node_depth_[node]; }    // root: 0
  int32_t subtree_end(int32_t node) const { return subtree_end_[node]; }  // one past the subtree
  // Tokens whose bytes are exactly the path to `node` (several when the vocabulary repeats).
  std::span<const int32_t> node_tokens(int32_t node) const {
    return std::span<const int32_t>(node_token_ids_).subspan(
        node_token_begin_[node], node_token_begin_[node + 1] - node_token_begin_[node]);
  }

 private:
  TokenIndex() = default;

  std::string bytes_;              // all tokens' bytes concatenated
  std::vector<uint32_t> offsets_;  // n_vocab + 1
  std::vector<uint8_t> special_, eog_;
  std::vector<int32_t> eog_ids_;
  std::unordered_map<std::string, int32_t> special_by_text_;

  std::vector<uint8_t> node_byte_;
  std::vector<int32_t> node_depth_;
  std::vector<int32_t> subtree_end_;
  std::vector<int32_t> node_token_begin_;  // trie_size + 1
  std::vector<int32_t> node_token_ids_;
};

}  // namespace cadenza::grammar
