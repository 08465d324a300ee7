#include "grammar/stack_arena.h"

#include <algorithm>

namespace cadenza::grammar {

namespace {

uint64_t pair_key(int32_t pos, int32_t parent) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) |
         static_cast<uint32_t>(parent);
}

void sort_unique(std::vector<int32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

StackArena::StackArena(const Grammar* grammar) : grammar_(grammar) {
  nodes_.push_back({-1, kNone, -1, -1});  // kAccept
}

int32_t StackArena::intern(int32_t pos, int32_t parent) {
  auto [it, inserted] = node_ids_.try_emplace(pair_key(pos, parent),
                                              static_cast<int32_t>(nodes_.size()));
  if (inserted) {
    const Element& e = grammar_->elements[pos];
    nodes_.push_back({pos, parent, e.kind == ElementKind::kBytes ? e.arg : -1, -1});
  }
  return it->second;
}

void StackArena::expand(int32_t pos, int32_t parent, std::vector<int32_t>& out) {
  const uint64_t key = pair_key(pos, parent);
  if (!visited_.insert(key).second) return;
  // A closure finished earlier is complete: reuse it (only top-level results are memoized, since
  // an inner expansion may have been cut short by a cycle through its caller).
  if (auto it = closures_.find(key); it != closures_.end()) {
    const int32_t count = pool_[it->second];
    out.insert(out.end(), pool_.begin() + it->second + 1, pool_.begin() + it->second + 1 + count);
    return;
  }
  const Element& e = grammar_->elements[pos];
  switch (e.kind) {
    case ElementKind::kBytes:
    case ElementKind::kToken:
      out.push_back(intern(pos, parent));
      return;
    case ElementKind::kEnd:
      if (parent == kNone) {
        out.push_back(kAccept);
      } else {
        const Node up = nodes_[parent];
        expand(up.pos, up.parent, out);
      }
      return;
    case ElementKind::kRule: {
      const int32_t next = pos + 1;
      // Tail call: nothing to come back to in this alternative, so the callee returns straight
      // to our parent and the stack does not grow.
      const int32_t callee_parent =
          grammar_->elements[next].kind == ElementKind::kEnd ? parent : intern(next, parent);
      for (int32_t alt : grammar_->rules[e.arg].alternatives) expand(alt, callee_parent, out);
      return;
    }
  }
}

std::span<const int32_t> StackArena::closure(int32_t pos, int32_t parent) {
  const uint32_t offset = closure_offset(pos, parent);
  return std::span<const int32_t>(pool_).subspan(offset + 1, pool_[offset]);
}

uint32_t StackArena::closure_offset(int32_t pos, int32_t parent) {
  const uint64_t key = pair_key(pos, parent);
  auto it = closures_.find(key);
  if (it == closures_.end()) {
    scratch_.clear();
    visited_.clear();
    expand(pos, parent, scratch_);
    sort_unique(scratch_);
    const uint32_t offset = static_cast<uint32_t>(pool_.size());
    pool_.push_back(static_cast<int32_t>(scratch_.size()));
    pool_.insert(pool_.end(), scratch_.begin(), scratch_.end());
    it = closures_.emplace(key, offset).first;
  }
  return it->second;
}

std::vector<int32_t> StackArena::start_stacks() {
  std::vector<int32_t> out;
  visited_.clear();
  for (int32_t alt : grammar_->rules[grammar_->root].alternatives) expand(alt, kNone, out);
  sort_unique(out);
  return out;
}

void StackArena::serialize(int32_t node, std::string& key) const {
  for (; node != kNone; node = nodes_[node].parent) {
    const int32_t pos = nodes_[node].pos;
    key.append(reinterpret_cast<const char*>(&pos), sizeof(pos));
    if (node == kAccept) break;
  }
}

}  // namespace cadenza::grammar
