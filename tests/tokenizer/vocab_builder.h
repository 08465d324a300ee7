// Hand-made vocabularies for the tokenizer unit tests: tokenizer.ggml.* metadata written with
// GgufWriter and parsed back, so the tests exercise the same path as real files.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_bytes.h"

namespace cadenza::test {

// Token types (tokenizer.ggml.token_type).
inline constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5,
                         kByte = 6;

class VocabBuilder {
 public:
  explicit VocabBuilder(std::string model, std::string pre = "")
      : model_(std::move(model)), pre_(std::move(pre)) {}

  int32_t add(std::string text, float score = 0.0f, int32_t type = kNormal) {
    texts_.push_back(std::move(text));
    scores_.push_back(score);
    types_.push_back(type);
    return static_cast<int32_t>(texts_.size() - 1);
  }

  // SentencePiece layout: <unk> 0, <s> 1, </s> 2, then <0x00>..<0xFF> at 3..258.
  VocabBuilder& spm_basics() {
    add("<unk>", 0, kUnknown);
    add("<s>", 0, kControl);
    add("</s>", 0, kControl);
    for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, kByte);
    return *this;
  }
  static int32_t spm_byte(uint8_t b) { return 3 + b; }

  // Byte-level layout: the stand-in character of byte b at id b.
  VocabBuilder& byte_alphabet() {
    for (int b = 0; b < 256; ++b) add(std::string(tok::byte_to_unicode(static_cast<uint8_t>(b))));
    return *this;
  }

  // Adds "<left> <right>" (texts in stand-in form) and, unless present, the merged token.
  int32_t merge(const std::string& left, const std::string& right) {
    merges_.push_back(left + " " + right);
    for (size_t i = 0; i < texts_.size(); ++i) {
      if (texts_[i] == left + right) return static_cast<int32_t>(i);
    }
    return add(left + right);
  }
  void raw_merge(std::string rule) { merges_.push_back(std::move(rule)); }

  void set(const std::string& key, gguf::Value v) { extra_[key] = std::move(v); }
  void omit(const std::string& key) { omitted_.insert(key); }

  std::vector<uint8_t> bytes() const {
    gguf::GgufWriter w;
    auto put = [&](const std::string& key, gguf::Value v) {
      if (omitted_.count(key) == 0 && extra_.count(key) == 0) w.set(key, std::move(v));
    };
    put("general.architecture", gguf::Value::string("llama"));
    put("tokenizer.ggml.model", gguf::Value::string(model_));
    if (!pre_.empty()) put("tokenizer.ggml.pre", gguf::Value::string(pre_));
    put("tokenizer.ggml.tokens", gguf::Value::string_array(texts_));
    put("tokenizer.ggml.scores", gguf::Value::f32_array(scores_));
    put("tokenizer.ggml.token_type", gguf::Value::i32_array(types_));
    if (model_ == "gpt2" || !merges_.empty()) {
      put("tokenizer.ggml.merges", gguf::Value::string_array(merges_));
    }
    for (const auto& [k, v] : extra_) w.set(k, v);
    return w.to_bytes();
  }

  Result<std::unique_ptr<Tokenizer>> build(const std::string& name = "test.gguf") const {
    const std::vector<uint8_t> image = bytes();
    auto file = gguf::GgufFile::parse(image, name);
    if (!file) return file.error_value();
    // The tokenizer copies what it needs: the file and its bytes may go away.
    return Tokenizer::from_gguf(**file);
  }

  std::unique_ptr<Tokenizer> build_ok() const {
    auto t = build();
    EXPECT_TRUE(t.ok()) << (t ? "" : t.error());
    return t ? std::move(*t) : nullptr;
  }

  const std::vector<std::string>& texts() const { return texts_; }

 private:
  std::string model_, pre_;
  std::vector<std::string> texts_;
  std::vector<float> scores_;
  std::vector<int32_t> types_;
  std::vector<std::string> merges_;
  std::map<std::string, gguf::Value> extra_;
  std::set<std::string> omitted_;
};

inline std::vector<int32_t> ids(std::initializer_list<int32_t> l) { return l; }

}  // namespace cadenza::test
