// GrammarMatcher: the state of one generation under a CompiledGrammar. Each step the engine asks
// which tokens may come next (fill_next_token_bitmask), samples among them, and feeds the chosen
// token back (accept_token).
//
// The state is a set of parse stacks (stack_arena.h) of a nondeterministic pushdown automaton
// over bytes: a token is allowed iff its bytes (or, for a token terminal, its id) keep at least
// one stack alive. A mask is the union over groups of stacks of each group's mask (a group: the
// stacks that share everything below their top frame, e.g. the alternatives of one character
// class), and a group's mask is computed in two parts (see README.md):
//   - its head (the group's top frames and the kHeadFrames - 1 frames below them) decides most
//     tokens: a walk of the vocabulary trie
//     (token_index.h) with the head alone, pruning a subtree as soon as nothing survives, gives
//     the tokens accepted inside the head and the trie subtrees where the walk pops below it
//     (HeadMask, cached in the CompiledGrammar per head, shared by all requests);
//   - those subtrees are then walked with the whole stack.
// Whole-state masks are cached too (CompiledGrammar), so a state seen before costs a copy.
//
// Limits: at most kMaxStacks live stacks; a byte that would produce more is not allowed (in
// accept_* and in masks alike: when the groups' walks together may have exceeded the cap, the
// mask is recomputed by one walk with the whole state, which applies the cap exactly as
// accept_token does). rollback() reaches back kMaxRollback tokens.
//
// Ownership: shares the CompiledGrammar. Thread-safety: one matcher per request, used by one
// thread at a time (fill_next_token_bitmask is const but grows the matcher's private memo).
// Copying is a fork: the copy and the original then advance independently (n > 1 samples); it
// copies the matcher's arena (the stacks met so far), which is small for typical grammars.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/stack_arena.h"

namespace cadenza::grammar {

class GrammarMatcher {
 public:
  static constexpr size_t kMaxStacks = kMaxLiveStacks;
  static constexpr int32_t kMaxRollback = 32;
  static constexpr int32_t kHeadFrames = 3;

  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // words.size() must be mask_words() == (n_vocab + 31) / 32. Bit i of words[i / 32] is set iff
  // token i may come next: a normal token whose bytes continue the grammar, a token a token
  // terminal allows here, or an end-of-generation id when can_end(). Nothing is allowed once
  // is_terminated() after an eog. Empty normal tokens are never allowed.
  void fill_next_token_bitmask(std::span<uint32_t> words) const;
  size_t mask_words() const { return grammar_->index().mask_words(); }

  // Advances by one token and returns true, or returns false and leaves the state unchanged when
  // the token is not allowed (exactly the tokens fill_next_token_bitmask sets). An eog id that no
  // token terminal wants is accepted iff can_end(), and then terminates the matcher.
  bool accept_token(int32_t id);
  // Advances by raw bytes (forced text, tests); all or nothing. Counts as one step for rollback.
  bool accept_bytes(std::string_view bytes);

  // What was accepted is a complete sentence of root.
  bool can_end() const;
  // An eog was accepted, or no further byte or token terminal can follow (only the end remains).
  bool is_terminated() const;

  // Undoes the last num_tokens accept_token/accept_bytes calls; num_tokens must be in
  // [0, rollback_depth()] (more is a bug: asserted, and clamped in release builds).
  void rollback(int32_t num_tokens);
  int32_t rollback_depth() const { return static_cast<int32_t>(history_.size()); }

  // Back to the start of the grammar; the history is cleared.
  void reset();

  // The canonical key of the current state (stacks serialized and sorted); equal keys mean equal
  // states across matchers of one grammar.
  std::string state_key() const;
  size_t num_stacks() const { return stacks_.size(); }

  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  struct Saved {
    std::vector<int32_t> stacks;
    bool terminated;
  };
  // The stacks after consuming `byte` from `from`, deduplicated; false when over kMaxStacks.
  bool step(std::span<const int32_t> from, uint8_t byte, std::vector<int32_t>& to) const;
  bool advance_token_terminal(int32_t id, std::vector<int32_t>& to) const;
  void compute_mask(std::span<uint32_t> words) const;
  // eog ids where the grammar can end, and what token terminals on top of stacks allow.
  void compute_terminal_bits(std::span<uint32_t> words) const;
  // Walks trie nodes [begin, end) from the stacks in walk_[base_depth], setting the tokens that
  // survive. With `head`, a node where the walk pops below the head (kAccept appears) is recorded
  // as a boundary and its subtree skipped.
  void walk(int32_t begin, int32_t end, int32_t base_depth, std::span<uint32_t> words,
            HeadMask* head) const;
  // The head mask of stacks that share their parent node (`group`, sorted ids).
  std::shared_ptr<const HeadMask> head_mask(std::span<const int32_t> group) const;
  void push_history();

  std::shared_ptr<const CompiledGrammar> grammar_;
  mutable StackArena arena_;
  std::vector<int32_t> stacks_;  // sorted, unique node ids
  bool terminated_ = false;
  std::deque<Saved> history_;
  std::vector<int32_t> initial_;
  // scratch for the trie walk: stacks per depth
  mutable std::vector<std::vector<int32_t>> walk_;
  mutable size_t walk_max_ = 0;  // the most stacks a walk step produced since last reset
};

}  // namespace cadenza::grammar
