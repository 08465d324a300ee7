#include "grammar/matcher.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace cadenza::grammar {

namespace {

void sort_unique(std::vector<int32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

bool token_set_has(const TokenSet& set, const TokenIndex& index, int32_t id) {
  const bool listed = std::binary_search(set.ids.begin(), set.ids.end(), id);
  return set.negated ? !listed && !index.is_eog(id) : listed;
}

void set_bit(std::span<uint32_t> words, int32_t id) {
  words[static_cast<size_t>(id) >> 5] |= uint32_t{1} << (id & 31);
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), arena_(&grammar_->grammar()) {
  initial_ = arena_.start_stacks();
  if (initial_.size() > kMaxStacks) initial_.clear();
  stacks_ = initial_;
}

bool GrammarMatcher::step(std::span<const int32_t> from, uint8_t byte,
                          std::vector<int32_t>& to) const {
  to.clear();
  if (from.size() == 1) {  // the common case: one stack, whose closure is already sorted
    const auto next = arena_.advance_byte(from[0], byte);
    to.assign(next.begin(), next.end());
  } else {
    // Usually only one of the stacks takes the byte (the alternatives of a UTF-8 class differ
    // in their first byte); its closure is already sorted and unique.
    int contributing = 0;
    for (int32_t node : from) {
      const auto next = arena_.advance_byte(node, byte);
      if (next.empty()) continue;
      ++contributing;
      to.insert(to.end(), next.begin(), next.end());
    }
    if (contributing > 1) sort_unique(to);
  }
  if (to.size() > kMaxStacks) {
    to.clear();
    return false;
  }
  return !to.empty();
}

bool GrammarMatcher::advance_token_terminal(int32_t id, std::vector<int32_t>& to) const {
  const Grammar& g = grammar_->grammar();
  for (int32_t node : stacks_) {
    if (node == StackArena::kAccept) continue;
    const Element& e = g.elements[arena_.pos(node)];
    if (e.kind != ElementKind::kToken || !token_set_has(g.token_sets[e.arg], grammar_->index(), id)) {
      continue;
    }
    const auto next = arena_.closure(arena_.pos(node) + 1, arena_.parent(node));
    to.insert(to.end(), next.begin(), next.end());
  }
  return !to.empty();
}

void GrammarMatcher::push_history() {
  history_.push_back({stacks_, terminated_});
  if (history_.size() > static_cast<size_t>(kMaxRollback)) history_.pop_front();
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (terminated_) return false;
  std::vector<int32_t> cur = stacks_, next;
  for (char c : bytes) {
    if (!step(cur, static_cast<uint8_t>(c), next)) return false;
    cur.swap(next);
  }
  push_history();
  stacks_ = std::move(cur);
  return true;
}

bool GrammarMatcher::accept_token(int32_t id) {
  const TokenIndex& index = grammar_->index();
  if (terminated_ || id < 0 || id >= index.n_vocab()) return false;
  std::vector<int32_t> next;
  advance_token_terminal(id, next);
  const std::string_view bytes = index.token_bytes(id);
  if (!index.is_special(id) && !index.is_eog(id) && !bytes.empty()) {
    std::vector<int32_t> cur = stacks_, tmp;
    bool alive = true;
    for (char c : bytes) {
      if (!step(cur, static_cast<uint8_t>(c), tmp)) {
        alive = false;
        break;
      }
      cur.swap(tmp);
    }
    if (alive) next.insert(next.end(), cur.begin(), cur.end());
  }
  sort_unique(next);
  if (!next.empty() && next.size() <= kMaxStacks) {
    push_history();
    stacks_ = std::move(next);
    return true;
  }
  if (index.is_eog(id) && can_end()) {
    push_history();
    terminated_ = true;
    return true;
  }
  return false;
}

bool GrammarMatcher::can_end() const {
  return !stacks_.empty() && stacks_.front() == StackArena::kAccept;
}

bool GrammarMatcher::is_terminated() const {
  return terminated_ || stacks_.empty() ||
         (stacks_.size() == 1 && stacks_.front() == StackArena::kAccept);
}

void GrammarMatcher::rollback(int32_t num_tokens) {
  assert(num_tokens >= 0 && num_tokens <= rollback_depth());
  num_tokens = std::clamp(num_tokens, 0, rollback_depth());
  for (int32_t k = 0; k < num_tokens; ++k) {
    stacks_ = std::move(history_.back().stacks);
    terminated_ = history_.back().terminated;
    history_.pop_back();
  }
}

void GrammarMatcher::reset() {
  stacks_ = initial_;
  terminated_ = false;
  history_.clear();
}

std::string GrammarMatcher::state_key() const {
  std::vector<std::string> parts;
  parts.reserve(stacks_.size());
  for (int32_t node : stacks_) {
    std::string s;
    arena_.serialize(node, s);
    parts.push_back(std::move(s));
  }
  std::sort(parts.begin(), parts.end());
  std::string key;
  for (const std::string& p : parts) {
    const uint32_t len = static_cast<uint32_t>(p.size());
    key.append(reinterpret_cast<const char*>(&len), sizeof(len));
    key += p;
  }
  return key;
}

void GrammarMatcher::fill_next_token_bitmask(std::span<uint32_t> words) const {
  assert(words.size() == mask_words());
  std::fill(words.begin(), words.end(), 0u);
  if (terminated_) return;
  std::string key = state_key();
  if (grammar_->lookup_mask(key, words)) return;
  compute_mask(words);
  grammar_->store_mask(std::move(key), words);
}

void GrammarMatcher::walk(int32_t begin, int32_t end, int32_t base_depth,
                          std::span<uint32_t> words, HeadMask* head) const {
  const TokenIndex& index = grammar_->index();
  for (int32_t i = begin; i < end;) {
    const int32_t d = index.node_depth(i);
    if (static_cast<size_t>(d) >= walk_.size()) walk_.resize(2 * walk_.size());
    if (!step(walk_[d - 1], index.node_byte(i), walk_[d])) {
      i = index.subtree_end(i);
      continue;
    }
    walk_max_ = std::max(walk_max_, walk_[d].size());
    if (head && walk_[d].front() == StackArena::kAccept) {  // popped below the head
      // The path to node i is the first d bytes of any token in its subtree (every trie leaf
      // ends a token, so the scan is short); cheaper than tracking the path at every node.
      int32_t j = i;
      while (index.node_tokens(j).empty()) ++j;
      head->boundary_nodes.push_back(i);
      head->boundary_paths.emplace_back(index.token_bytes(index.node_tokens(j)[0]).substr(0, d));
      i = index.subtree_end(i);
      continue;
    }
    for (int32_t id : index.node_tokens(i)) set_bit(words, id);
    ++i;
  }
}

std::shared_ptr<const HeadMask> GrammarMatcher::head_mask(std::span<const int32_t> group) const {
  // The head: the group's top positions and the top kHeadFrames - 1 positions of their shared
  // parent; `complete` when that is the whole stack (then kAccept is the real end of the grammar,
  // not a boundary). Key: count, tops (sorted), parent frames, flag.
  std::vector<int32_t> tops, below;
  for (int32_t node : group) tops.push_back(arena_.pos(node));
  std::sort(tops.begin(), tops.end());
  int32_t n = arena_.parent(group[0]);
  for (; n != StackArena::kNone && below.size() + 1 < static_cast<size_t>(kHeadFrames);
       n = arena_.parent(n)) {
    below.push_back(arena_.pos(n));
  }
  const bool complete = n == StackArena::kNone;
  std::string key;
  const auto put = [&key](int32_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(static_cast<int32_t>(tops.size()));
  for (int32_t p : tops) put(p);
  for (int32_t p : below) put(p);
  key.push_back(complete ? 'c' : 'h');
  if (auto hit = grammar_->lookup_head(key)) return hit;

  auto head = std::make_shared<HeadMask>();
  head->accepted.assign(mask_words(), 0);
  const int32_t parent = arena_.make_stack(below);
  if (walk_.empty()) walk_.resize(16);
  walk_[0].clear();
  for (int32_t p : tops) walk_[0].push_back(arena_.intern(p, parent));
  sort_unique(walk_[0]);
  walk_max_ = walk_[0].size();
  walk(1, grammar_->index().trie_size(), 0, head->accepted, complete ? nullptr : head.get());
  head->max_stacks = walk_max_;
  grammar_->store_head(std::move(key), head);
  return head;
}

void GrammarMatcher::compute_terminal_bits(std::span<uint32_t> words) const {
  const TokenIndex& index = grammar_->index();
  const Grammar& g = grammar_->grammar();
  if (can_end()) {
    for (int32_t id : index.eog_ids()) set_bit(words, id);
  }
  for (int32_t node : stacks_) {
    if (node == StackArena::kAccept) continue;
    const Element& e = g.elements[arena_.pos(node)];
    if (e.kind != ElementKind::kToken) continue;
    const TokenSet& set = g.token_sets[e.arg];
    if (!set.negated) {
      for (int32_t id : set.ids) set_bit(words, id);
      continue;
    }
    for (int32_t id = 0; id < index.n_vocab(); ++id) {
      if (token_set_has(set, index, id)) set_bit(words, id);
    }
  }
}

void GrammarMatcher::compute_mask(std::span<uint32_t> words) const {
  const TokenIndex& index = grammar_->index();
  const Grammar& g = grammar_->grammar();
  compute_terminal_bits(words);
  std::vector<int32_t> byte_tops;
  for (int32_t node : stacks_) {
    if (node != StackArena::kAccept &&
        g.elements[arena_.pos(node)].kind == ElementKind::kBytes) {
      byte_tops.push_back(node);
    }
  }
  // Groups of byte-terminal stacks with one parent: what their head decides, then the boundary
  // subtrees with the group's whole stacks.
  std::sort(byte_tops.begin(), byte_tops.end(), [this](int32_t a, int32_t b) {
    const int32_t pa = arena_.parent(a), pb = arena_.parent(b);
    return pa != pb ? pa < pb : a < b;
  });
  if (walk_.empty()) walk_.resize(16);
  std::vector<int32_t> group;
  size_t stacks_bound = 0;  // bounds the whole state's stacks at any trie node
  for (size_t begin = 0; begin < byte_tops.size();) {
    size_t end = begin + 1;
    while (end < byte_tops.size() && arena_.parent(byte_tops[end]) == arena_.parent(byte_tops[begin])) {
      ++end;
    }
    group.assign(byte_tops.begin() + static_cast<std::ptrdiff_t>(begin),
                 byte_tops.begin() + static_cast<std::ptrdiff_t>(end));
    std::sort(group.begin(), group.end());
    begin = end;
    const std::shared_ptr<const HeadMask> head = head_mask(group);
    for (size_t w = 0; w < words.size(); ++w) words[w] |= head->accepted[w];
    // The boundaries are in preorder, so consecutive paths share prefixes: walk_[k] keeps the
    // group's stacks after the first k bytes of the previous path (valid up to `valid`), and only
    // the bytes past the common prefix are stepped. A subtree walk below a boundary at depth d
    // overwrites walk_[> d] only, and the next boundary's path diverges above d.
    walk_[0] = group;
    walk_max_ = group.size();
    size_t valid = 0;
    const std::string* prev = nullptr;
    for (size_t b = 0; b < head->boundary_nodes.size(); ++b) {
      const int32_t at = head->boundary_nodes[b];
      const std::string& path = head->boundary_paths[b];
      size_t k = 0;
      if (prev) {
        const size_t limit = std::min({valid, prev->size(), path.size()});
        while (k < limit && (*prev)[k] == path[k]) ++k;
      }
      prev = &path;
      while (walk_.size() <= path.size() + 1) walk_.resize(2 * walk_.size());
      for (; k < path.size(); ++k) {
        if (!step(walk_[k], static_cast<uint8_t>(path[k]), walk_[k + 1])) break;
        walk_max_ = std::max(walk_max_, walk_[k + 1].size());
      }
      valid = k;
      if (k < path.size()) continue;  // the whole stacks die on the way to this boundary
      for (int32_t id : index.node_tokens(at)) set_bit(words, id);
      walk(at + 1, index.subtree_end(at), static_cast<int32_t>(path.size()), words, nullptr);
    }
    stacks_bound += std::max(head->max_stacks, walk_max_);
  }
  if (stacks_bound > kMaxStacks) {
    // The groups may together exceed the cap where each alone did not: redo the byte part with
    // the whole state, exactly as accept_token steps it.
    std::fill(words.begin(), words.end(), 0u);
    compute_terminal_bits(words);
    walk_[0] = byte_tops;
    std::sort(walk_[0].begin(), walk_[0].end());
    walk(1, index.trie_size(), 0, words, nullptr);
  }
}

}  // namespace cadenza::grammar
