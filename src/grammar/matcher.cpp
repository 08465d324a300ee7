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
  for (int32_t node : from) {
    if (node != StackArena::kAccept) arena_.advance_byte(node, byte, to);
  }
  if (to.size() > 1) sort_unique(to);
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

void GrammarMatcher::compute_mask(std::span<uint32_t> words) const {
  const TokenIndex& index = grammar_->index();
  const Grammar& g = grammar_->grammar();
  if (can_end()) {
    for (int32_t id : index.eog_ids()) set_bit(words, id);
  }
  // Token terminals.
  std::vector<int32_t> byte_tops;
  for (int32_t node : stacks_) {
    if (node == StackArena::kAccept) continue;
    const Element& e = g.elements[arena_.pos(node)];
    if (e.kind == ElementKind::kBytes) {
      byte_tops.push_back(node);
      continue;
    }
    const TokenSet& set = g.token_sets[e.arg];
    if (!set.negated) {
      for (int32_t id : set.ids) set_bit(words, id);
      continue;
    }
    for (int32_t id = 0; id < index.n_vocab(); ++id) {
      if (token_set_has(set, index, id)) set_bit(words, id);
    }
  }
  if (byte_tops.empty()) return;
  // The trie walk: walk_[d] holds the stacks after the first d bytes of the current path; a
  // subtree is skipped as soon as no stack survives its first byte.
  if (walk_.empty()) walk_.resize(16);
  walk_[0] = std::move(byte_tops);
  const int32_t n_nodes = index.trie_size();
  for (int32_t i = 1; i < n_nodes;) {
    const int32_t d = index.node_depth(i);
    if (static_cast<size_t>(d) >= walk_.size()) walk_.resize(2 * walk_.size());
    if (!step(walk_[d - 1], index.node_byte(i), walk_[d])) {
      i = index.subtree_end(i);
      continue;
    }
    for (int32_t id : index.node_tokens(i)) set_bit(words, id);
    ++i;
  }
}

}  // namespace cadenza::grammar
