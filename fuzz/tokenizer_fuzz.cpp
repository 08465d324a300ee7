// libFuzzer target for the tokenizers (src/tokenizer): encode of arbitrary bytes, decode, and the
// streaming detokenizer, over every tokenizer model: SentencePiece ("llama"), byte-level BPE
// ("gpt2"), SentencePiece-style BPE ("gemma4"), WordPiece ("bert") and Unigram ("t5").
//
// The vocabularies are synthesized here (written with GgufWriter and read back, the path real
// files take): one SentencePiece vocabulary with and one without the space prefix, one Gemma 4
// style vocabulary, one WordPiece, two Unigram (with a precompiled charsmap; with and without
// byte fallback), and one byte-level BPE vocabulary per pre-tokenizer regex set. When
// $CADENZA_FUZZ_VOCABS names a folder (scripts/fuzz.sh sets it to ../shared/tokenizer when
// present), its *.gguf vocabularies are fuzzed too.
//
// Input: byte 0 picks the vocabulary and the encode flags, the rest is the text. Invariants:
// every id is inside the vocabulary; with add_special, BOS comes first when the vocabulary adds
// it; the streaming detokenizer's output is valid UTF-8 and equals decode() whenever decode() is
// valid UTF-8; on the synthetic lossless vocabularies (every byte has a token; not WordPiece or
// Unigram, whose normalization changes text) decode(encode(text)) == text for text without
// special-token texts (and, for SentencePiece, without U+2581, which decodes to a space).
// Crashes, leaks, hangs and exceptions are findings.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../tests/tokenizer/charsmap_builder.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_bytes.h"

namespace {

using cadenza::Tokenizer;
using cadenza::gguf::GgufFile;
using cadenza::gguf::GgufWriter;
using cadenza::gguf::Value;

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

struct Vocab {
  std::unique_ptr<Tokenizer> tokenizer;
  bool synthetic = false;
  bool spm = false;
  std::vector<std::string> special_texts;  // control, user-defined and unknown token texts
  bool lossless = true;  // false where normalization changes text (WordPiece, Unigram)
};

std::vector<Vocab>& vocabs() {
  static std::vector<Vocab> v;
  return v;
}

// Builds the metadata of a vocabulary and reads it back into a Tokenizer.
class Builder {
 public:
  explicit Builder(std::string model, std::string pre = "") : model_(std::move(model)), pre_(std::move(pre)) {}

  int32_t add(std::string text, float score = 0.0f, int32_t type = kNormal) {
    for (size_t i = 0; i < texts_.size(); ++i)
      if (texts_[i] == text) return static_cast<int32_t>(i);
    if (type == kControl || type == kUserDefined || type == kUnknown) specials_.push_back(text);
    texts_.push_back(std::move(text));
    scores_.push_back(score);
    types_.push_back(type);
    return static_cast<int32_t>(texts_.size() - 1);
  }
  // A byte-level merge: left and right in stand-in form; adds the merged token.
  void merge(const std::string& left, const std::string& right) {
    merges_.push_back(left + " " + right);
    add(left + right);
  }
  void set(std::string key, Value v) { extra_.emplace_back(std::move(key), std::move(v)); }
  void lossy() { lossless_ = false; }

  Vocab build(bool spm) const {
    GgufWriter w;
    w.set("general.architecture", Value::string("llama"));
    w.set("tokenizer.ggml.model", Value::string(model_));
    if (!pre_.empty()) w.set("tokenizer.ggml.pre", Value::string(pre_));
    w.set("tokenizer.ggml.tokens", Value::string_array(texts_));
    w.set("tokenizer.ggml.scores", Value::f32_array(scores_));
    w.set("tokenizer.ggml.token_type", Value::i32_array(types_));
    if (!merges_.empty()) w.set("tokenizer.ggml.merges", Value::string_array(merges_));
    for (const auto& [k, v] : extra_) w.set(k, v);
    const std::vector<uint8_t> bytes = w.to_bytes();
    auto file = GgufFile::parse(bytes, "synthetic-" + model_ + "-" + pre_ + ".gguf");
    check(file.ok());
    auto t = Tokenizer::from_gguf(**file);
    check(t.ok());  // a vocabulary this target builds must load
    return Vocab{std::move(*t), true, spm, specials_, lossless_};
  }

 private:
  std::string model_, pre_;
  std::vector<std::string> texts_, merges_, specials_;
  std::vector<float> scores_;
  std::vector<int32_t> types_;
  std::vector<std::pair<std::string, Value>> extra_;
  bool lossless_ = true;
};

Vocab spm_vocab(bool space_prefix) {
  Builder b("llama");
  b.add("<unk>", 0, kUnknown);
  b.add("<s>", 0, kControl);
  b.add("</s>", 0, kControl);
  for (int c = 0; c < 256; ++c) {
    static const char* hex = "0123456789ABCDEF";
    b.add(std::string("<0x") + hex[c >> 4] + hex[c & 15] + ">", 0, kByte);
  }
  const std::string sp = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  float score = -1;
  for (const std::string& piece :
       {sp, sp + "t", sp + "th", sp + "the", std::string("t"), std::string("h"), std::string("e"),
        std::string("he"), std::string("the"), std::string("a"), std::string("b"), std::string("ab"),
        std::string("abc"), std::string("\xC3\xA9"), sp + "\xC3\xA9", std::string("\xE6\x97\xA5"),
        std::string("\xE6\x9C\xAC"), std::string("\xE6\x97\xA5\xE6\x9C\xAC"), sp + sp,
        std::string("\n"), std::string("1"), std::string("12"), std::string("\xF0\x9F\x98\x80")}) {
    b.add(piece, score);
    score -= 0.5f;
  }
  b.add("<|user|>", 0, kUserDefined);
  b.add("<|im_start|>", 0, kControl);
  b.add("<|im_end|>", 0, kControl);
  b.add("<unused0>", 0, kUnused);
  b.set("tokenizer.ggml.unknown_token_id", Value::u32(0));
  b.set("tokenizer.ggml.bos_token_id", Value::u32(1));
  b.set("tokenizer.ggml.eos_token_id", Value::u32(2));
  b.set("tokenizer.ggml.add_space_prefix", Value::boolean(space_prefix));
  b.set("tokenizer.ggml.add_eos_token", Value::boolean(!space_prefix));
  return b.build(true);
}

Vocab bpe_vocab(const std::string& pre) {
  Builder b("gpt2", pre);
  for (int c = 0; c < 256; ++c) b.add(std::string(cadenza::tok::byte_to_unicode(static_cast<uint8_t>(c))));
  auto u = [](std::string_view raw) { return cadenza::tok::bytes_to_unicode(raw); };
  b.merge(u(" "), u("t"));
  b.merge(u("h"), u("e"));
  b.merge(u(" t"), u("he"));
  b.merge(u("a"), u("b"));
  b.merge(u("ab"), u("c"));
  b.merge(u("\xC3"), u("\xA9"));
  b.merge(u(" "), u("\xC3\xA9"));
  b.merge(u("1"), u("2"));
  b.merge(u("12"), u("3"));
  b.merge(u(" "), u(" "));
  b.merge(u("\n"), u("\n"));
  b.merge(u("\xE6\x97"), u("\xA5"));
  b.merge(u("\xE6"), u("\x97"));
  b.add("the");  // a whole-piece token without a merge path (ignore_merges vocabularies use it)
  const int32_t eot = b.add("<|endoftext|>", 0, kControl);
  b.add("<|tool|>", 0, kUserDefined);
  b.set("tokenizer.ggml.bos_token_id", Value::u32(static_cast<uint32_t>(eot)));
  b.set("tokenizer.ggml.eos_token_id", Value::u32(static_cast<uint32_t>(eot)));
  return b.build(false);
}

// Gemma 4's SentencePiece-style BPE: U+2581 for spaces, ranked merges over characters, <0xXX>.
Vocab spm_bpe_vocab() {
  Builder b("gemma4");
  b.add("<pad>", 0, kControl);
  b.add("<eos>", 0, kControl);
  b.add("<bos>", 0, kControl);
  b.add("<unk>", 0, kUnknown);
  for (int c = 0; c < 256; ++c) {
    static const char* hex = "0123456789ABCDEF";
    b.add(std::string("<0x") + hex[c >> 4] + hex[c & 15] + ">", 0, kByte);
  }
  const std::string sp = "\xE2\x96\x81";
  for (const std::string& c : {sp, std::string("t"), std::string("h"), std::string("e"), std::string("\n"),
                               std::string("\xC3\xA9"), std::string("1")}) {
    b.add(c, -1000);
  }
  b.merge(sp, "t");
  b.merge("h", "e");
  b.merge(sp + "t", "he");
  b.merge("\n", "\n");
  b.merge(sp, sp);
  b.merge(sp, "\xC3\xA9");
  b.add("<|tool_call>", 0, kUserDefined);
  b.set("tokenizer.ggml.bos_token_id", Value::u32(2));
  b.set("tokenizer.ggml.eos_token_id", Value::u32(1));
  b.set("tokenizer.ggml.unknown_token_id", Value::u32(3));
  return b.build(true);
}

// WordPiece (BERT): uncased, so text is lowercased, accents stripped, controls dropped.
Vocab wordpiece_vocab() {
  Builder b("bert");
  for (const char* s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) b.add(s, 0, kControl);
  const std::string w = "\xE2\x96\x81";
  for (const std::string& p : {w + "the", w + "t", std::string("he"), std::string("h"), std::string("e"),
                               w + "a", w + ",", w + "\xE4\xB8\xAD", w + "12", std::string("3"),
                               std::string("##"), w + "!"}) {
    b.add(p);
  }
  b.set("tokenizer.ggml.unknown_token_id", Value::u32(1));
  b.set("tokenizer.ggml.cls_token_id", Value::u32(2));
  b.set("tokenizer.ggml.seperator_token_id", Value::u32(3));
  b.lossy();
  return b.build(false);
}

// Unigram (T5): Viterbi over scores, a small precompiled charsmap, whitespace squeezed.
Vocab unigram_vocab(bool byte_fallback) {
  Builder b("t5");
  b.add("<pad>", 0, kControl);
  b.add("</s>", 0, kControl);
  b.add("<unk>", 0, kUnknown);
  if (byte_fallback) {
    for (int c = 0; c < 256; ++c) {
      static const char* hex = "0123456789ABCDEF";
      b.add(std::string("<0x") + hex[c >> 4] + hex[c & 15] + ">", 0, kByte);
    }
  }
  const std::string sp = "\xE2\x96\x81";
  float score = -1;
  for (const std::string& p : {sp, sp + "the", sp + "t", std::string("he"), std::string("h"), std::string("e"),
                               std::string("a"), sp + "a", std::string("\xE4\xB8\xAD"), sp + "12", std::string("3"),
                               std::string("ab"), std::string("abc")}) {
    b.add(p, score);
    score -= 0.25f;
  }
  b.add("<extra_id_0>", 0, kUserDefined);
  const std::vector<uint8_t> map =
      cadenza::test::build_charsmap({{"\t", " "}, {"\n", " "}, {"\xEF\xBC\xA1", "A"}, {"\x01", ""}, {"AB", "x"}});
  std::vector<Value> items;
  for (uint8_t x : map) items.push_back(Value::u8(x));
  b.set("tokenizer.ggml.precompiled_charsmap", Value::array(cadenza::gguf::ValueType::UINT8, std::move(items)));
  b.set("tokenizer.ggml.unknown_token_id", Value::u32(2));
  b.set("tokenizer.ggml.eos_token_id", Value::u32(1));
  b.lossy();
  return b.build(true);
}

void load_vocabs() {
  vocabs().push_back(spm_vocab(true));
  vocabs().push_back(spm_vocab(false));
  vocabs().push_back(spm_bpe_vocab());
  vocabs().push_back(wordpiece_vocab());
  vocabs().push_back(unigram_vocab(false));
  vocabs().push_back(unigram_vocab(true));
  // One name per regex set of src/tokenizer/pretokenizer.cpp.
  for (const char* pre : {"default", "gpt-2", "llama-bpe", "dbrx", "qwen2", "deepseek-llm", "deepseek-coder",
                          "deepseek-v3", "falcon", "starcoder", "tekken", "gpt-4o", "seed-coder", "bloom",
                          "qwen35"}) {
    vocabs().push_back(bpe_vocab(pre));
  }
  if (const char* dir = std::getenv("CADENZA_FUZZ_VOCABS"); dir && *dir) {
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.path().extension() == ".gguf") files.push_back(e.path());
    std::sort(files.begin(), files.end());  // a stable vocabulary numbering across runs
    for (const auto& p : files) {
      auto file = GgufFile::open(p.string());
      if (!file) continue;
      auto t = Tokenizer::from_gguf(**file);
      if (!t) continue;  // e.g. a tokenizer model this project does not support
      vocabs().push_back(Vocab{std::move(*t), false, false, {}});
    }
  }
}

bool valid_utf8(std::string_view s) {
  while (!s.empty()) {
    const auto c = cadenza::tok::check_utf8(s);
    if (c.kind != cadenza::tok::Utf8Check::kComplete) return false;
    s.remove_prefix(c.length);
  }
  return true;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  load_vocabs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Vocab& v = vocabs()[(data[0] >> 2) % vocabs().size()];
  const bool add_special = data[0] & 1;
  const bool parse_special = data[0] & 2;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const Tokenizer& t = *v.tokenizer;

  const std::vector<int32_t> ids = t.encode(text, add_special, parse_special);
  for (int32_t id : ids) check(id >= 0 && id < t.n_vocab());
  if (add_special && t.add_bos()) check(!ids.empty() && ids.front() == t.bos_id());
  if (add_special && t.add_eos()) check(!ids.empty() && ids.back() == t.eos_id());

  const std::string decoded = t.decode(ids);
  (void)t.decode(ids, /*render_special=*/true);

  cadenza::StreamingDetokenizer stream(t);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  check(valid_utf8(streamed));
  if (valid_utf8(decoded)) check(streamed == decoded);

  if (v.synthetic && v.lossless && !add_special && !parse_special) {
    bool plain = !(v.spm && contains(text, "\xE2\x96\x81"));
    for (const std::string& s : v.special_texts) plain = plain && !contains(text, s);
    if (plain) check(decoded == text);
  }
  return 0;
}
