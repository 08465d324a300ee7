#include "grammar/token_index.h"

#include <algorithm>
#include <numeric>

namespace cadenza::grammar {

std::shared_ptr<const TokenIndex> TokenIndex::build(std::vector<std::string> token_bytes,
                                                    std::vector<uint8_t> is_special,
                                                    std::vector<int32_t> eog_ids,
                                                    std::vector<std::string> special_text) {
  std::shared_ptr<TokenIndex> index(new TokenIndex());
  const size_t n = token_bytes.size();
  is_special.resize(n, 0);
  special_text.resize(n);
  index->offsets_.reserve(n + 1);
  index->offsets_.push_back(0);
  for (const std::string& b : token_bytes) {
    index->bytes_ += b;
    index->offsets_.push_back(static_cast<uint32_t>(index->bytes_.size()));
  }
  index->special_ = std::move(is_special);
  index->eog_.assign(n, 0);
  for (int32_t id : eog_ids) {
    if (id >= 0 && static_cast<size_t>(id) < n && !index->eog_[id]) {
      index->eog_[id] = 1;
      index->eog_ids_.push_back(id);
    }
  }
  std::sort(index->eog_ids_.begin(), index->eog_ids_.end());
  for (size_t id = 0; id < n; ++id) {
    if (index->special_[id] && !special_text[id].empty()) {
      index->special_by_text_.try_emplace(special_text[id], static_cast<int32_t>(id));
    }
  }

  // The trie in preorder: sort the normal tokens by bytes, then each token adds the nodes past
  // its common prefix with the previous one (children come out in increasing byte order).
  std::vector<int32_t> order;
  for (size_t id = 0; id < n; ++id) {
    if (!index->special_[id] && !index->eog_[id] && !token_bytes[id].empty()) order.push_back(static_cast<int32_t>(id));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return token_bytes[a] < token_bytes[b]; });
  auto& node_byte = index->node_byte_;
  auto& depth = index->node_depth_;
  auto& end = index->subtree_end_;
  auto& tok_begin = index->node_token_begin_;
  auto& tok_ids = index->node_token_ids_;
  const auto add_node = [&](uint8_t byte, int32_t d) {
    node_byte.push_back(byte);
    depth.push_back(d);
    end.push_back(0);
    tok_begin.push_back(static_cast<int32_t>(tok_ids.size()));
  };
  add_node(0, 0);
  std::vector<int32_t> path = {0};  // path[d] = node at depth d
  std::string_view prev;
  for (int32_t id : order) {
    const std::string_view cur = token_bytes[id];
    size_t lcp = 0;
    while (lcp < prev.size() && lcp < cur.size() && prev[lcp] == cur[lcp]) ++lcp;
    while (path.size() > lcp + 1) {
      end[path.back()] = static_cast<int32_t>(node_byte.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < cur.size(); ++d) {
      path.push_back(static_cast<int32_t>(node_byte.size()));
      add_node(static_cast<uint8_t>(cur[d]), static_cast<int32_t>(d + 1));
    }
    tok_ids.push_back(id);
    prev = cur;
  }
  while (!path.empty()) {
    end[path.back()] = static_cast<int32_t>(node_byte.size());
    path.pop_back();
  }
  tok_begin.push_back(static_cast<int32_t>(tok_ids.size()));
  return index;
}

std::optional<int32_t> TokenIndex::find_by_text(std::string_view spelling) const {
  if (auto it = special_by_text_.find(std::string(spelling)); it != special_by_text_.end()) {
    return it->second;
  }
  for (int32_t id = 0; id < n_vocab(); ++id) {
    if (!special_[id] && token_bytes(id) == spelling) return id;
  }
  return std::nullopt;
}

}  // namespace cadenza::grammar
