#include "tokenizer/spm.h"

#include <algorithm>

#include "tokenizer/unicode_bytes.h"

namespace cadenza::tok {

namespace {

struct Symbol {
  size_t offset;  // into the text
  size_t length;  // 0: merged into its left neighbour
  int32_t prev, next;
};

struct Candidate {
  float score;
  int32_t left, right;
  uint32_t length;  // left.length + right.length when queued (< 2^28, see spm_encode)
};

// Heap order: the top is the highest score, and among equal scores the leftmost pair.
bool lower_priority(const Candidate& a, const Candidate& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

class Session {
 public:
  Session(const Vocab& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void run(std::vector<int32_t>& out) {
    // One symbol per UTF-8 character; each byte of invalid UTF-8 is a symbol of its own. (The
    // reference trusts the lead byte's length, so a stray lead byte swallows the next bytes,
    // e.g. the first byte of an escaped space, which then cannot decode as a space. Both agree
    // on valid UTF-8, the only input the model authors' tokenizers accept.)
    for (size_t off = 0; off < text_.size();) {
      const Utf8Check c = check_utf8(text_.substr(off));
      const size_t len = c.kind == Utf8Check::kComplete ? c.length : 1;
      const auto index = static_cast<int32_t>(symbols_.size());
      symbols_.push_back({off, len, index - 1, off + len == text_.size() ? -1 : index + 1});
      off += len;
    }
    for (int32_t i = 1; i < static_cast<int32_t>(symbols_.size()); ++i) try_add(i - 1, i);

    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), lower_priority);
      const Candidate c = heap_.back();
      heap_.pop_back();
      Symbol& left = symbols_[c.left];
      Symbol& right = symbols_[c.right];
      // Stale: a side was merged since this pair was queued (the reference's check).
      if (left.length == 0 || right.length == 0 || left.length + right.length != c.length) {
        continue;
      }
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = c.left;
      try_add(left.prev, c.left);
      try_add(c.left, left.next);
    }

    for (int32_t i = symbols_.empty() ? -1 : 0; i >= 0; i = symbols_[i].next) emit(symbols_[i], out);
  }

 private:
  void try_add(int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols_[left];
    const Symbol& r = symbols_[right];
    const size_t length = l.length + r.length;
    const auto id = vocab_.find(text_.substr(l.offset, length));
    if (!id) return;
    heap_.push_back({vocab_.scores[*id], left, right, static_cast<uint32_t>(length)});
    std::push_heap(heap_.begin(), heap_.end(), lower_priority);
  }

  void emit(const Symbol& s, std::vector<int32_t>& out) const {
    const std::string_view piece = text_.substr(s.offset, s.length);
    if (auto id = vocab_.find(piece)) {
      out.push_back(*id);
      return;
    }
    // Every merged symbol is a token by construction, so only single characters get here.
    for (char c : piece) {
      const int32_t id = vocab_.byte_tokens[static_cast<uint8_t>(c)];
      if (id >= 0) out.push_back(id);
    }
  }

  const Vocab& vocab_;
  std::string_view text_;
  std::vector<Symbol> symbols_;
  std::vector<Candidate> heap_;
};

}  // namespace

void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  // Symbol indices are int32: absurdly long text is tokenized in chunks cut at character
  // boundaries (tokens never span a cut; text of this size never reaches a model anyway).
  constexpr size_t kMaxChunk = size_t{1} << 28;
  while (text.size() > kMaxChunk) {
    size_t cut = kMaxChunk;
    while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) --cut;
    if (cut == 0) cut = kMaxChunk;
    Session(vocab, text.substr(0, cut)).run(out);
    text.remove_prefix(cut);
  }
  if (!text.empty()) Session(vocab, text).run(out);
}

void spm_escape_spaces(std::string_view text, std::string& out) {
  for (char c : text) {
    if (c == ' ') {
      out += "\xE2\x96\x81";
    } else {
      out.push_back(c);
    }
  }
}

}  // namespace cadenza::tok
