// CompiledGrammar: a GBNF grammar lowered, checked and bound to one vocabulary (TokenIndex),
// ready for GrammarMatcher. Compile once per distinct grammar; share across requests.
//
// Ownership: held by shared_ptr<const CompiledGrammar>; keeps its TokenIndex alive.
// Thread-safety: immutable to users; the internal mask cache is guarded by a mutex, so matchers
// on different threads may share one CompiledGrammar.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/bounded_cache.h"
#include "grammar/grammar.h"
#include "grammar/token_index.h"
#include "util/result.h"

namespace cadenza::grammar {

class CompiledGrammar;

// What the top frames of one parse stack decide about the next token, whatever lies below them:
// `accepted` (a full mask) holds the tokens those frames alone accept; every other token is
// rejected except possibly those in the trie subtrees `boundary_nodes` (preorder, disjoint), where
// the walk popped below the head and the rest of the stack decides (GrammarMatcher checks them
// with the whole stack). boundary_paths[i] is the bytes from the trie root to boundary_nodes[i].
struct HeadMask {
  std::vector<uint32_t> accepted;
  size_t max_stacks = 0;  // the most stacks the walk held at once (see GrammarMatcher's cap)
  std::vector<int32_t> boundary_nodes;
  std::vector<std::string> boundary_paths;
};

// Parses, lowers and checks `gbnf` (gbnf_parser.h for the syntax) and binds it to `index`.
// Errors ("line:column: message"): everything parse_gbnf reports, plus token terminals naming
// ids out of range or texts no token has, left recursion (a rule that can reach itself before
// consuming input, other than in tail position: a pushdown matcher cannot expand it), and
// exceeded CompileLimits (time included).
Result<std::shared_ptr<const CompiledGrammar>> compile_gbnf(std::string_view gbnf,
                                                            std::shared_ptr<const TokenIndex> index,
                                                            const CompileLimits& limits = {});

class CompiledGrammar {
 public:
  const Grammar& grammar() const { return grammar_; }
  const TokenIndex& index() const { return *index_; }
  const std::shared_ptr<const TokenIndex>& index_ptr() const { return index_; }

  // nullable(rule): the rule can match the empty string.
  bool nullable(int32_t rule) const { return nullable_[rule] != 0; }

  // --- mask caches (used by GrammarMatcher; see matcher.h for what is cached) ---
  // Both are bounded by bytes (the oldest entries are evicted) and keyed by canonical stack
  // serializations, so equal states in different requests share the work.
  static constexpr size_t kDefaultMaskCacheBytes = size_t{64} << 20;
  static constexpr size_t kDefaultHeadCacheBytes = size_t{64} << 20;
  // Whole-state masks: a hit copies the cached mask into `words` (mask_words long).
  bool lookup_mask(std::string_view key, std::span<uint32_t> words) const;
  void store_mask(std::string key, std::span<const uint32_t> words) const;
  size_t mask_cache_entries() const { return state_cache_.size(); }
  void set_mask_cache_bytes(size_t bytes) const { state_cache_.set_capacity(bytes); }  // 0: off

  // The part of a stack's mask that its top frames decide (HeadMask), per head.
  std::shared_ptr<const HeadMask> lookup_head(std::string_view key) const {
    return head_cache_.get(key);
  }
  void store_head(std::string key, std::shared_ptr<const HeadMask> head) const;
  size_t head_cache_entries() const { return head_cache_.size(); }
  void set_head_cache_bytes(size_t bytes) const { head_cache_.set_capacity(bytes); }  // 0: off

  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenIndex> index,
                  std::vector<uint8_t> nullable);  // use compile_gbnf

 private:
  Grammar grammar_;
  std::shared_ptr<const TokenIndex> index_;
  std::vector<uint8_t> nullable_;

  mutable BoundedCache<std::vector<uint32_t>> state_cache_{kDefaultMaskCacheBytes};
  mutable BoundedCache<HeadMask> head_cache_{kDefaultHeadCacheBytes};
};

}  // namespace cadenza::grammar
