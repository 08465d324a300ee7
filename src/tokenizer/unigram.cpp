#include "tokenizer/unigram.h"

#include <algorithm>
#include <limits>

#include "tokenizer/unicode_bytes.h"

namespace cadenza::tok {

namespace {

size_t char_length(std::string_view s) {
  const Utf8Check c = check_utf8(s);
  return c.kind == Utf8Check::kComplete ? c.length : 1;
}

}  // namespace

bool UnigramModel::in_lattice(const Vocab& v, int32_t id) const {
  const TokenType t = v.types[id];
  return (t == TokenType::kNormal || t == TokenType::kUserDefined) &&
         v.texts[id].size() <= kMaxPieceBytes;
}

Result<UnigramModel> UnigramModel::build(const Vocab& vocab, std::string_view file_name) {
  UnigramModel m;
  m.unk_ = vocab.unk;
  if (m.unk_ < 0) {
    for (int32_t id = 0; id < vocab.size(); ++id) {
      if (vocab.types[id] == TokenType::kUnknown) {
        m.unk_ = id;
        break;
      }
    }
  }
  if (m.unk_ < 0) {
    return make_error("{}: a Unigram ('t5') vocabulary needs an unknown token "
                      "(tokenizer.ggml.unknown_token_id, or a token of type unknown)",
                      file_name);
  }
  bool any_normal = false;
  m.min_score_ = std::numeric_limits<float>::max();
  m.max_score_ = std::numeric_limits<float>::lowest();
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.types[id] == TokenType::kByte) m.byte_fallback_ = true;
    if (!m.in_lattice(vocab, id)) continue;
    if (vocab.types[id] == TokenType::kNormal) {
      any_normal = true;
      m.min_score_ = std::min(m.min_score_, vocab.scores[id]);
      m.max_score_ = std::max(m.max_score_, vocab.scores[id]);
    }
    const std::string& text = vocab.texts[id];
    uint64_t h = kFnvBasis;
    for (size_t i = 0; i < text.size();) {
      const size_t len = char_length(std::string_view(text).substr(i));
      for (size_t j = 0; j < len; ++j) h = fnv_add(h, text[i + j]);
      i += len;
      m.prefixes_.insert(mix64(h));
    }
  }
  if (!any_normal) m.min_score_ = m.max_score_ = 0;
  // Scores of -inf (NaN in the file becomes -inf at load) would make every path -inf: keep the
  // unknown edge finite so that a path always exists.
  if (!(m.min_score_ > std::numeric_limits<float>::lowest() / 2)) {
    m.min_score_ = std::numeric_limits<float>::lowest() / 4;
  }
  return m;
}

void UnigramModel::encode(const Vocab& vocab, std::string_view text,
                          std::vector<int32_t>& out) const {
  if (text.empty()) return;
  struct Node {
    double score;     // best path score to this position
    int32_t id;       // last token of that path
    int32_t start;    // where that token starts; -1: not reached yet
  };
  // Positions are byte offsets; absurdly long text is cut into chunks at character boundaries
  // (int32 positions).
  constexpr size_t kMaxChunk = size_t{1} << 28;
  while (text.size() > kMaxChunk) {
    size_t cut = kMaxChunk;
    while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) --cut;
    if (cut == 0) cut = kMaxChunk;
    encode(vocab, text.substr(0, cut), out);
    text.remove_prefix(cut);
  }
  const size_t n = text.size();
  std::vector<Node> best(n + 1, Node{0.0, -1, -1});
  best[0].start = 0;
  const double unk_score = static_cast<double>(min_score_) - kUnknownPenalty;

  for (size_t start = 0; start < n;) {
    const size_t first_len = char_length(text.substr(start));
    const double base = best[start].score;
    bool single = false;
    if (best[start].start >= 0) {
      uint64_t h = kFnvBasis;
      for (size_t end = start; end < n;) {
        const size_t len = char_length(text.substr(end));
        for (size_t j = 0; j < len; ++j) h = fnv_add(h, text[end + j]);
        end += len;
        const uint64_t key = mix64(h);
        if (!prefixes_.contains(key)) break;
        const std::string_view piece = text.substr(start, end - start);
        const int32_t id = vocab.index.find_hashed(vocab.texts, piece, key);
        if (id < 0 || !in_lattice(vocab, id)) continue;
        const double score = vocab.types[id] == TokenType::kUserDefined
                                 ? static_cast<double>(piece.size()) * max_score_ - 0.1
                                 : static_cast<double>(vocab.scores[id]);
        Node& target = best[end];
        if (target.start < 0 || base + score > target.score) {
          target = {base + score, id, static_cast<int32_t>(start)};
        }
        if (end - start == first_len) single = true;
      }
      if (!single) {
        Node& target = best[start + first_len];
        if (target.start < 0 || base + unk_score > target.score) {
          target = {base + unk_score, unk_, static_cast<int32_t>(start)};
        }
      }
    }
    start += first_len;
  }

  // Backtrack (every position on the path was reached: each reached position has at least the
  // unknown edge to the next character).
  std::vector<std::pair<int32_t, int32_t>> path;  // (id, start), last first
  for (size_t pos = n; pos > 0;) {
    const Node& node = best[pos];
    path.emplace_back(node.id, node.start);
    pos = static_cast<size_t>(node.start);
  }
  std::reverse(path.begin(), path.end());
  for (size_t i = 0; i < path.size(); ++i) {
    const auto [id, begin] = path[i];
    if (id != unk_) {
      out.push_back(id);
      continue;
    }
    // A run of unknown characters: one unknown token, or their bytes with byte fallback.
    size_t j = i;
    while (j + 1 < path.size() && path[j + 1].first == unk_) ++j;
    const size_t end = j + 1 < path.size() ? static_cast<size_t>(path[j + 1].second) : n;
    if (byte_fallback_) {
      for (size_t b = static_cast<size_t>(begin); b < end; ++b) {
        const int32_t t = vocab.byte_tokens[static_cast<uint8_t>(text[b])];
        if (t >= 0) out.push_back(t);
      }
    } else {
      out.push_back(unk_);
    }
    i = j;
  }
}

}  // namespace cadenza::tok
