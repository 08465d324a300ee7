// StackArena (internal to GrammarMatcher): the persistent parse stacks of a nondeterministic
// pushdown matcher.
//
// A stack is a chain of nodes {pos, parent}: the top node's pos is the grammar position to match
// next (always a kBytes or kToken element after closure), each lower node's pos is where to
// continue once the rule above it ends. Nodes are hash-consed, so equal stacks are equal ids and
// advancing a byte creates at most one node per surviving stack (the tail is shared, never
// copied). Node 0 is kAccept: the empty stack (the root rule has been matched completely).
//
// closure(pos, parent) expands rule references and pops finished alternatives until every stack
// tops on a terminal (or is kAccept); results are memoized per (pos, parent). A rule reference in
// tail position (followed by kEnd) pushes nothing, so right recursion and repetition keep the
// stack flat; compile_gbnf rejects the left recursion that would grow it without bound.
//
// Thread-safety: none; owned by one matcher (copied with it).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/compiled_grammar.h"

namespace cadenza::grammar {

// The most parse stacks a matcher state may hold (GrammarMatcher::kMaxStacks).
inline constexpr size_t kMaxLiveStacks = 4096;

class StackArena {
 public:
  static constexpr int32_t kAccept = 0;
  static constexpr int32_t kNone = -1;

  explicit StackArena(const Grammar* grammar);

  int32_t pos(int32_t node) const { return nodes_[node].pos; }
  int32_t parent(int32_t node) const { return nodes_[node].parent; }
  size_t size() const { return nodes_.size(); }

  // The stacks (node ids) reached from grammar position `pos` over the stack `parent`, after
  // expanding rules and popping ended alternatives. Memoized; the span stays valid until the next
  // call that adds to the arena.
  std::span<const int32_t> closure(int32_t pos, int32_t parent);

  // Stacks after `node` (top on a kBytes element containing `byte`, or not: then none) consumes
  // `byte`; empty when the byte does not match. Whatever byte matched, the result is the same
  // closure(pos + 1, parent), memoized on the node, so the trie walk's inner step is a bit test
  // and an array read. The span is valid until the arena grows.
  std::span<const int32_t> advance_byte(int32_t node, uint8_t byte) {
    Node& n = nodes_[node];
    if (n.byte_set < 0 || !grammar_->byte_sets[n.byte_set].has(byte)) return {};
    if (n.advanced < 0) {
      const uint32_t offset = closure_offset(n.pos + 1, n.parent);
      nodes_[node].advanced = static_cast<int32_t>(offset);
    }
    const int32_t offset = nodes_[node].advanced;
    return std::span<const int32_t>(pool_).subspan(offset + 1, pool_[offset]);
  }

  // The node {pos, parent} (hash-consed).
  int32_t intern(int32_t pos, int32_t parent);

  // The stack whose positions are `positions` (top first) over an empty bottom.
  int32_t make_stack(std::span<const int32_t> positions) {
    int32_t node = kNone;
    for (size_t k = positions.size(); k-- > 0;) node = intern(positions[k], node);
    return node;
  }

  // The stacks at the start of the grammar (root's alternatives expanded), sorted and unique.
  std::vector<int32_t> start_stacks();

  // Appends one stack's positions, top to bottom, 4 bytes each, to `key` (kAccept: -1).
  void serialize(int32_t node, std::string& key) const;

 private:
  struct Node {
    int32_t pos;
    int32_t parent;
    int32_t byte_set;  // kBytes top: its set; else -1
    int32_t advanced;  // offset in pool_ of closure(pos + 1, parent), once computed; else -1
  };
  uint32_t closure_offset(int32_t pos, int32_t parent);
  // Adds the closure of (pos, parent) to out; `visited_` holds the (pos, parent) pairs already
  // expanded by this top-level call (their stacks are in out), which cuts tail-call cycles and
  // keeps diamonds of nullable rules from expanding twice.
  void expand(int32_t pos, int32_t parent, std::vector<int32_t>& out);

  const Grammar* grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;     // (pos, parent) -> node
  std::unordered_map<uint64_t, uint32_t> closures_;    // (pos, parent) -> offset in pool_
  std::vector<int32_t> pool_;                          // closures: count, then node ids
  std::vector<int32_t> scratch_;
  std::unordered_set<uint64_t> visited_;
};

}  // namespace cadenza::grammar
