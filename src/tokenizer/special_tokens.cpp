#include "tokenizer/special_tokens.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace cadenza::tok {

namespace {

bool is_candidate(TokenType t) {
  return t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUserDefined;
}

// The reference strips with isspace() in the C locale.
bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

struct Claim {
  size_t end;
  int32_t token;  // -1: whitespace swallowed by a strip flag
};

}  // namespace

SpecialTokenSplitter::SpecialTokenSplitter(const Vocab& vocab) {
  roots_.fill(-1);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (is_candidate(vocab.types[id])) by_priority_.push_back(id);
  }
  std::stable_sort(by_priority_.begin(), by_priority_.end(), [&](int32_t a, int32_t b) {
    return vocab.texts[a].size() > vocab.texts[b].size();
  });
  for (size_t rank = 0; rank < by_priority_.size(); ++rank) {
    const int32_t id = by_priority_[rank];
    const std::string& text = vocab.texts[id];  // never empty (load_vocab renames empty ones)
    auto new_node = [&](uint8_t byte) {
      nodes_.push_back(Node{});
      nodes_.back().byte = byte;
      return static_cast<int32_t>(nodes_.size() - 1);
    };
    const auto b0 = static_cast<uint8_t>(text[0]);
    if (roots_[b0] < 0) roots_[b0] = new_node(b0);
    int32_t node = roots_[b0];
    for (size_t i = 1; i < text.size(); ++i) {
      const auto byte = static_cast<uint8_t>(text[i]);
      int32_t next = child(node, byte);
      if (next < 0) {
        next = new_node(byte);
        nodes_[next].next_sibling = nodes_[node].first_child;
        nodes_[node].first_child = next;
      }
      node = next;
    }
    nodes_[node].token = id;
    nodes_[node].priority = static_cast<int32_t>(rank);
    if (vocab.types[id] == TokenType::kUserDefined) any_user_defined_ = true;
  }
}

int32_t SpecialTokenSplitter::child(int32_t node, uint8_t byte) const {
  for (int32_t c = nodes_[node].first_child; c >= 0; c = nodes_[c].next_sibling) {
    if (nodes_[c].byte == byte) return c;
  }
  return -1;
}

void SpecialTokenSplitter::split(const Vocab& vocab, std::string_view text, bool parse_special,
                                 std::vector<Fragment>& out) const {
  const size_t n = text.size();
  if (n == 0) return;
  if (by_priority_.empty() || (!parse_special && !any_user_defined_)) {
    out.push_back({-1, 0, n});
    return;
  }

  // Which admissible candidates occur at all (by priority rank).
  std::vector<uint8_t> occurs(by_priority_.size(), 0);
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    int32_t node = roots_[static_cast<uint8_t>(text[i])];
    for (size_t j = i + 1; node >= 0; ++j) {
      const Node& nd = nodes_[node];
      if (nd.token >= 0 &&
          (parse_special || vocab.types[nd.token] == TokenType::kUserDefined)) {
        occurs[nd.priority] = 1;
        any = true;
      }
      if (j >= n) break;
      node = child(node, static_cast<uint8_t>(text[j]));
    }
  }
  if (!any) {
    out.push_back({-1, 0, n});
    return;
  }

  std::map<size_t, Claim> claims;  // begin -> claim; claims never overlap
  for (size_t rank = 0; rank < by_priority_.size(); ++rank) {
    if (!occurs[rank]) continue;
    const int32_t token = by_priority_[rank];
    const std::string_view needle = vocab.texts[token];
    size_t pos = 0;
    while (pos < n) {
      const size_t begin = text.find(needle, pos);
      if (begin == std::string_view::npos) break;
      const size_t end = begin + needle.size();
      // An occurrence overlapping claim C: so does every one starting before C's end, so the
      // search resumes there.
      auto next = claims.upper_bound(begin);
      if (next != claims.end() && next->first < end) {
        pos = next->second.end;
        continue;
      }
      if (next != claims.begin() && std::prev(next)->second.end > begin) {
        pos = std::prev(next)->second.end;
        continue;
      }
      if (vocab.lstrip[token]) {
        const size_t limit = next != claims.begin() ? std::prev(next)->second.end : 0;
        size_t from = begin;
        while (from > limit && is_ascii_space(text[from - 1])) --from;
        if (from < begin) claims.emplace(from, Claim{begin, -1});
      }
      claims.emplace(begin, Claim{end, token});
      size_t to = end;
      if (vocab.rstrip[token]) {
        const size_t limit = next != claims.end() ? next->first : n;
        while (to < limit && is_ascii_space(text[to])) ++to;
        if (to > end) claims.emplace(end, Claim{to, -1});
      }
      pos = to;  // occurrences of one token do not overlap each other
    }
  }

  size_t pos = 0;
  for (const auto& [begin, claim] : claims) {
    if (begin > pos) out.push_back({-1, pos, begin});
    if (claim.token >= 0) out.push_back({claim.token, begin, claim.end});
    pos = claim.end;
  }
  if (pos < n) out.push_back({-1, pos, n});
}

}  // namespace cadenza::tok
