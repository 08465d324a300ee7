#include "tokenizer/bpe.h"

#include <algorithm>

#include "tokenizer/unicode_bytes.h"

namespace cadenza::tok {

namespace {

constexpr int32_t kDead = -2;  // symbol token of a symbol merged into its left neighbour

// Heap order: the top is the lowest rank, and among equal ranks the leftmost pair.
bool lower_priority(const BpeModel::Scratch::Candidate& a, const BpeModel::Scratch::Candidate& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

Result<BpeModel> BpeModel::build(const Vocab& vocab, std::string_view file_name) {
  BpeModel m;
  m.merges_.reserve(vocab.merges.size());
  std::string joined;
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    const std::string& rule = vocab.merges[i];
    // The separator is the first space after the first character, as the reference reads it
    // (a left part can never be empty).
    const size_t sp = rule.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= rule.size()) {
      return make_error("{}: tokenizer.ggml.merges[{}] '{}' is not two tokens separated by a space",
                        file_name, i, rule);
    }
    const std::string_view left = std::string_view(rule).substr(0, sp);
    const std::string_view right = std::string_view(rule).substr(sp + 1);
    const auto l = vocab.find(left);
    const auto r = vocab.find(right);
    if (!l || !r) {
      return make_error("{}: tokenizer.ggml.merges[{}] '{}' references '{}', which is not in the "
                        "vocabulary",
                        file_name, i, rule, l ? right : left);
    }
    joined.assign(left);
    joined.append(right);
    const auto merged = vocab.find(joined);
    if (!merged) {
      return make_error("{}: tokenizer.ggml.merges[{}] '{}' produces '{}', which is not in the "
                        "vocabulary",
                        file_name, i, rule, joined);
    }
    // A repeated rule keeps its first (lowest) rank, as in the reference.
    m.merges_.insert(*l, *r, Merge{static_cast<int32_t>(i), *merged});
  }
  return m;
}

void BpeModel::push_candidate(Scratch& s, int32_t left, int32_t right) const {
  if (left < 0 || right < 0) return;
  const int32_t lt = s.symbols[left].token, rt = s.symbols[right].token;
  if (lt < 0 || rt < 0) return;
  const Merge* m = merges_.find(lt, rt);
  if (m == nullptr) return;
  s.heap.push_back({m->rank, left, right, lt, rt, m->merged});
  std::push_heap(s.heap.begin(), s.heap.end(), lower_priority);
}

void BpeModel::merge_all(Scratch& s) const {
  const auto n = static_cast<int32_t>(s.symbols.size());
  for (int32_t i = 1; i < n; ++i) push_candidate(s, i - 1, i);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), lower_priority);
    const Scratch::Candidate c = s.heap.back();
    s.heap.pop_back();
    Scratch::Symbol& left = s.symbols[c.left];
    Scratch::Symbol& right = s.symbols[c.right];
    // Stale: one side was merged since this pair was queued (a token's text only grows, so an
    // unchanged token id means an unchanged symbol).
    if (left.token != c.left_tok || right.token != c.right_tok || left.next != c.right) continue;
    left.token = c.merged;
    left.next = right.next;
    if (right.next >= 0) s.symbols[right.next].prev = c.left;
    right.token = kDead;
    push_candidate(s, left.prev, c.left);
    push_candidate(s, c.left, left.next);
  }
}

void BpeModel::encode_piece(std::string_view piece, const Vocab& vocab, Scratch& s,
                            std::vector<int32_t>& out) const {
  // Symbol indices are int32: an absurdly long piece is merged in chunks (see spm.cpp).
  constexpr size_t kMaxChunk = size_t{1} << 28;
  while (piece.size() > kMaxChunk) {
    encode_piece(piece.substr(0, kMaxChunk), vocab, s, out);
    piece.remove_prefix(kMaxChunk);
  }
  if (piece.empty()) return;
  if (vocab.ignore_merges && piece.size() > 1) {
    s.mapped.clear();
    for (char c : piece) s.mapped += byte_to_unicode(static_cast<uint8_t>(c));
    if (auto id = vocab.find(s.mapped)) {
      out.push_back(*id);
      return;
    }
  }

  const auto n = static_cast<int32_t>(piece.size());
  s.symbols.clear();
  s.heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    const int32_t tok = vocab.byte_tokens[static_cast<uint8_t>(piece[i])];
    s.symbols.push_back({tok, i - 1, i + 1 < n ? i + 1 : -1, i});
  }
  merge_all(s);

  for (int32_t i = 0; i >= 0; i = s.symbols[i].next) {
    const int32_t tok = s.symbols[i].token;
    if (tok >= 0) {
      out.push_back(tok);
    } else if (vocab.unk >= 0) {
      out.push_back(vocab.unk);
    }
  }
}


void BpeModel::encode_chars(std::string_view piece, const Vocab& vocab, Scratch& s,
                            std::vector<int32_t>& out) const {
  constexpr size_t kMaxChunk = size_t{1} << 28;  // int32 symbol indices, as encode_piece
  while (piece.size() > kMaxChunk) {
    size_t cut = kMaxChunk;
    while (cut > 0 && (static_cast<uint8_t>(piece[cut]) & 0xC0) == 0x80) --cut;
    if (cut == 0) cut = kMaxChunk;
    encode_chars(piece.substr(0, cut), vocab, s, out);
    piece.remove_prefix(cut);
  }
  if (piece.empty()) return;
  s.symbols.clear();
  s.heap.clear();
  for (size_t off = 0; off < piece.size();) {
    const Utf8Check c = check_utf8(piece.substr(off));
    const size_t len = c.kind == Utf8Check::kComplete ? c.length : 1;
    const auto id = vocab.find(piece.substr(off, len));
    const auto index = static_cast<int32_t>(s.symbols.size());
    s.symbols.push_back({id ? *id : -1, index - 1, off + len < piece.size() ? index + 1 : -1,
                         static_cast<int32_t>(off)});
    off += len;
  }
  merge_all(s);
  for (int32_t i = 0; i >= 0; i = s.symbols[i].next) {
    const Scratch::Symbol& sym = s.symbols[i];
    if (sym.token >= 0) {
      out.push_back(sym.token);
      continue;
    }
    // A character that is no token (so never merged): its bytes' tokens (<0xXX>, else the unknown
    // token; bytes with neither are dropped).
    const size_t end =
        sym.next >= 0 ? static_cast<size_t>(s.symbols[sym.next].offset) : piece.size();
    for (size_t b = static_cast<size_t>(sym.offset); b < end; ++b) {
      const int32_t id = vocab.byte_tokens[static_cast<uint8_t>(piece[b])];
      if (id >= 0) out.push_back(id);
    }
  }
}

}  // namespace cadenza::tok
