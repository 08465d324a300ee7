#include "tokenizer/tokenizer.h"

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/sp_normalizer.h"
#include "tokenizer/spm.h"
#include "tokenizer/unigram.h"
#include "tokenizer/unicode_bytes.h"
#include "tokenizer/vocab.h"
#include "tokenizer/wordpiece.h"

namespace cadenza {

using tok::TokenType;
using tok::VocabKind;

struct Tokenizer::Impl {
  tok::Vocab vocab;
  std::optional<tok::BpeModel> bpe;        // kBpe and kSpmBpe
  std::optional<tok::PreTokenizer> pre;    // kBpe only
  std::optional<tok::WordPiece> wordpiece;  // kWpm only
  std::optional<tok::UnigramModel> unigram;     // kUgm only
  std::optional<tok::SpNormalizer> normalizer;  // kUgm only
  std::optional<tok::SpecialTokenSplitter> specials;
  // Piece of every token as rendered with render_special = true (computed once: byte-level
  // pieces need the stand-in characters mapped back to bytes).
  std::vector<std::string> pieces;

  bool renders_as_special(int32_t id) const {
    const TokenType t = vocab.types[id];
    return t == TokenType::kControl || t == TokenType::kUnknown;
  }

  std::string piece_of(int32_t id) const;
  void encode_spm(std::string_view text, const std::vector<tok::Fragment>& fragments,
                  std::vector<int32_t>& out) const;
  void encode_bpe(std::string_view text, const std::vector<tok::Fragment>& fragments,
                  std::vector<int32_t>& out) const;
  void encode_spm_bpe(std::string_view text, const std::vector<tok::Fragment>& fragments,
                      std::vector<int32_t>& out) const;
  void encode_wpm(std::string_view text, const std::vector<tok::Fragment>& fragments,
                  std::vector<int32_t>& out) const;
  void encode_ugm(std::string_view text, const std::vector<tok::Fragment>& fragments,
                  std::vector<int32_t>& out) const;
};

std::string Tokenizer::Impl::piece_of(int32_t id) const {
  const std::string& text = vocab.texts[id];
  switch (vocab.types[id]) {
    case TokenType::kNormal:
      if (vocab.escapes_spaces()) {
        // U+2581 stands for a space in SentencePiece vocabularies.
        std::string out;
        for (size_t i = 0; i < text.size();) {
          if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
            out.push_back(' ');
            i += 3;
          } else {
            out.push_back(text[i++]);
          }
        }
        return out;
      }
      return tok::unicode_to_bytes(text);
    case TokenType::kByte:
      return std::string(1, static_cast<char>(*tok::parse_byte_token(text)));
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUserDefined:
      return text;  // stored verbatim, never escaped
    case TokenType::kUnused:
    case TokenType::kUndefined:
      break;
  }
  return {};  // the reference renders unused/undefined tokens as nothing
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  auto vocab = tok::load_vocab(file);
  if (!vocab) return vocab.error_value();
  auto impl = std::make_unique<Impl>();
  impl->vocab = std::move(*vocab);
  tok::Vocab& v = impl->vocab;

  if (v.kind == VocabKind::kBpe || v.kind == VocabKind::kSpmBpe) {
    auto bpe = tok::BpeModel::build(v, file.name());
    if (!bpe) return bpe.error_value();
    impl->bpe = std::move(*bpe);
    std::vector<std::string>().swap(v.merges);  // indexed now; free the strings
  }
  if (v.kind == VocabKind::kBpe) {
    const tok::PreTokenizerSpec* spec = tok::find_pretokenizer(v.pre);  // checked by load_vocab
    auto pre = tok::PreTokenizer::compile(*spec);
    if (!pre) return make_error("{}: {}", file.name(), pre.error());
    impl->pre = std::move(*pre);
  }
  if (v.kind == VocabKind::kWpm) impl->wordpiece = tok::WordPiece::build(v);
  if (v.kind == VocabKind::kUgm) {
    auto ugm = tok::UnigramModel::build(v, file.name());
    if (!ugm) return ugm.error_value();
    impl->unigram = std::move(*ugm);
    auto norm = tok::SpNormalizer::build(std::move(v.charsmap), v.remove_extra_whitespaces);
    if (!norm) {
      return make_error("{}: tokenizer.ggml.{}", file.name(), norm.error());
    }
    impl->normalizer = std::move(*norm);
  }
  impl->specials.emplace(v);
  impl->pieces.reserve(v.texts.size());
  for (int32_t id = 0; id < v.size(); ++id) impl->pieces.push_back(impl->piece_of(id));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

Tokenizer::Tokenizer(std::unique_ptr<const Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

namespace {

// The walk every model shares: special-token fragments go to `out` as they are; each text
// fragment goes to encode_text(piece, prefixed), where `prefixed` says whether the vocabulary's
// space prefix applies to it (add_space_prefix, and the fragment is the first or follows a special
// token: SentencePiece's rule, which the reference follows).
template <typename EncodeText>
void for_each_text(const tok::Vocab& vocab, std::string_view text,
                   const std::vector<tok::Fragment>& fragments, std::vector<int32_t>& out,
                   EncodeText&& encode_text) {
  bool after_special = true;
  for (const tok::Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    encode_text(text.substr(f.begin, f.end - f.begin), vocab.add_space_prefix && after_special);
    after_special = false;
  }
}

// SentencePiece's spaces: U+2581 for every space, and one in front when `prefixed`.
void spm_escape(std::string_view piece, bool prefixed, std::string& escaped) {
  escaped.clear();
  if (prefixed) escaped = "\xE2\x96\x81";
  tok::spm_escape_spaces(piece, escaped);
}

}  // namespace

void Tokenizer::Impl::encode_spm(std::string_view text,
                                 const std::vector<tok::Fragment>& fragments,
                                 std::vector<int32_t>& out) const {
  std::string escaped;
  for_each_text(vocab, text, fragments, out, [&](std::string_view piece, bool prefixed) {
    spm_escape(piece, prefixed, escaped);
    tok::spm_encode(vocab, escaped, out);
  });
}

void Tokenizer::Impl::encode_bpe(std::string_view text,
                                 const std::vector<tok::Fragment>& fragments,
                                 std::vector<int32_t>& out) const {
  // Byte-level BPE has no space prefix: the pre-tokenizer's pieces are merged as they are.
  std::vector<std::string_view> pieces;
  tok::BpeModel::Scratch scratch;
  for_each_text(vocab, text, fragments, out, [&](std::string_view fragment, bool) {
    pieces.clear();
    pre->split(fragment, pieces);
    for (std::string_view piece : pieces) bpe->encode_piece(piece, vocab, scratch, out);
  });
}

void Tokenizer::Impl::encode_spm_bpe(std::string_view text,
                                     const std::vector<tok::Fragment>& fragments,
                                     std::vector<int32_t>& out) const {
  // Spaces are escaped as for SentencePiece (with the same space-prefix rule), then the text is
  // cut into runs of newlines and runs of anything else, and each run is merged on its own.
  std::string escaped;
  tok::BpeModel::Scratch scratch;
  for_each_text(vocab, text, fragments, out, [&](std::string_view piece, bool prefixed) {
    spm_escape(piece, prefixed, escaped);
    const std::string_view e = escaped;
    for (size_t begin = 0; begin < e.size();) {
      const bool newline = e[begin] == '\n';
      size_t end = begin + 1;
      while (end < e.size() && (e[end] == '\n') == newline) ++end;
      bpe->encode_chars(e.substr(begin, end - begin), vocab, scratch, out);
      begin = end;
    }
  });
}

void Tokenizer::Impl::encode_wpm(std::string_view text,
                                 const std::vector<tok::Fragment>& fragments,
                                 std::vector<int32_t>& out) const {
  for_each_text(vocab, text, fragments, out, [&](std::string_view piece, bool) {
    wordpiece->encode(vocab, piece, out);
  });
}

void Tokenizer::Impl::encode_ugm(std::string_view text,
                                 const std::vector<tok::Fragment>& fragments,
                                 std::vector<int32_t>& out) const {
  // SentencePiece normalizes each text fragment on its own, the dummy prefix included.
  std::string normalized;
  for_each_text(vocab, text, fragments, out, [&](std::string_view piece, bool prefixed) {
    normalized.clear();
    normalizer->normalize(piece, prefixed, normalized);
    unigram->encode(vocab, normalized, out);
  });
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && m.vocab.add_bos) out.push_back(m.vocab.bos);
  std::vector<tok::Fragment> fragments;
  m.specials->split(m.vocab, text, parse_special, fragments);
  switch (m.vocab.kind) {
    case VocabKind::kSpm: m.encode_spm(text, fragments, out); break;
    case VocabKind::kBpe: m.encode_bpe(text, fragments, out); break;
    case VocabKind::kSpmBpe: m.encode_spm_bpe(text, fragments, out); break;
    case VocabKind::kWpm: m.encode_wpm(text, fragments, out); break;
    case VocabKind::kUgm: m.encode_ugm(text, fragments, out); break;
  }
  if (add_special && m.vocab.add_eos) out.push_back(m.vocab.eos);
  return out;
}

std::string Tokenizer::token_piece(int32_t id, bool render_special) const {
  const Impl& m = *impl_;
  if (!m.vocab.valid_id(id)) return {};
  if (!render_special && m.renders_as_special(id)) return {};
  return m.pieces[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  const Impl& m = *impl_;
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (!m.vocab.valid_id(id)) continue;
    if (!render_special && m.renders_as_special(id)) continue;
    const std::string& piece = m.pieces[id];
    // The reference removes one leading space from the first token only (even when that token
    // renders as nothing, e.g. a BOS: then no space is removed at all).
    if (i == 0 && m.vocab.add_space_prefix && !piece.empty() && piece[0] == ' ') {
      out.append(piece, 1);
    } else {
      out += piece;
    }
  }
  return out;
}

int32_t Tokenizer::n_vocab() const { return impl_->vocab.size(); }
int32_t Tokenizer::bos_id() const { return impl_->vocab.bos; }
int32_t Tokenizer::eos_id() const { return impl_->vocab.eos; }
int32_t Tokenizer::unk_id() const { return impl_->vocab.unk; }
bool Tokenizer::add_bos() const { return impl_->vocab.add_bos; }
bool Tokenizer::add_eos() const { return impl_->vocab.add_eos; }

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return impl_->vocab.valid_id(id) && impl_->vocab.end_of_generation[id] != 0;
}

bool Tokenizer::is_control(int32_t id) const {
  return impl_->vocab.valid_id(id) && impl_->vocab.types[id] == TokenType::kControl;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string kEmpty;
  return impl_->vocab.valid_id(id) ? impl_->vocab.texts[id] : kEmpty;
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  return impl_->vocab.find(text);
}

}  // namespace cadenza
