// CompiledGrammar: a GBNF grammar lowered, checked and bound to one vocabulary (TokenIndex),
// ready for GrammarMatcher. Compile once per distinct grammar; share across requests.
//
// Ownership: held by shared_ptr<const CompiledGrammar>; keeps its TokenIndex alive.
// Thread-safety: immutable to users; the internal mask cache is guarded by a mutex, so matchers
// on different threads may share one CompiledGrammar.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_index.h"
#include "util/result.h"

namespace cadenza::grammar {

class CompiledGrammar;

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

  // --- mask cache (used by GrammarMatcher) ---
  // Bounded by bytes: when full, the oldest masks are evicted. Keys are canonical matcher states
  // (GrammarMatcher serializes its stacks), so equal states in different requests share a mask.
  static constexpr size_t kDefaultMaskCacheBytes = size_t{64} << 20;
  // Copies the cached mask for `key` into `words` and returns true, or returns false.
  bool lookup_mask(std::string_view key, std::span<uint32_t> words) const;
  void store_mask(std::string key, std::span<const uint32_t> words) const;
  size_t mask_cache_entries() const;
  void set_mask_cache_bytes(size_t bytes) const;  // 0 disables the cache (for benchmarks)

  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenIndex> index,
                  std::vector<uint8_t> nullable);  // use compile_gbnf

 private:
  Grammar grammar_;
  std::shared_ptr<const TokenIndex> index_;
  std::vector<uint8_t> nullable_;

  struct CacheEntry {
    std::string key;
    std::vector<uint32_t> words;
  };
  mutable std::mutex cache_mutex_;
  mutable std::list<CacheEntry> cache_order_;  // oldest first
  mutable std::unordered_map<std::string_view, std::list<CacheEntry>::iterator> cache_;
  mutable size_t cache_bytes_ = 0;
  mutable size_t cache_capacity_ = kDefaultMaskCacheBytes;
};

}  // namespace cadenza::grammar
