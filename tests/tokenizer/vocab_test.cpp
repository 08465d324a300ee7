// Validation of tokenizer.ggml.* metadata: every malformed vocabulary is a clear error (naming
// the file and the key), never a crash.
#include <string>

#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "vocab_builder.h"

namespace cadenza {
namespace {

using test::VocabBuilder;

VocabBuilder small_spm() {
  VocabBuilder b("llama");
  b.spm_basics();
  b.add("\xE2\x96\x81", -1);
  b.add("a", -1);
  return b;
}

VocabBuilder small_bpe() {
  VocabBuilder b("gpt2", "gpt-2");
  b.byte_alphabet();
  b.merge("a", "b");
  return b;
}

// Builds and expects an error that starts with the file name and contains every fragment.
void expect_error(const VocabBuilder& b, std::initializer_list<std::string_view> fragments) {
  auto t = b.build("bad.gguf");
  ASSERT_FALSE(t.ok()) << "expected an error";
  EXPECT_EQ(t.error().rfind("bad.gguf: ", 0), 0u) << t.error();
  for (std::string_view f : fragments) {
    EXPECT_NE(t.error().find(f), std::string::npos) << "'" << f << "' not in: " << t.error();
  }
}

TEST(Vocab, ValidVocabulariesLoad) {
  EXPECT_TRUE(small_spm().build().ok());
  EXPECT_TRUE(small_bpe().build().ok());
}

TEST(Vocab, UnsupportedModelsAreClearErrors) {
  for (const char* model : {"rwkv", "plamo2", "none", "no_vocab", "something-new"}) {
    VocabBuilder b(model);
    b.add("a");
    expect_error(b, {"tokenizer.ggml.model", model, "not supported"});
  }
  VocabBuilder b = small_spm();
  b.omit("tokenizer.ggml.model");
  expect_error(b, {"tokenizer.ggml.model"});
}

TEST(Vocab, UnknownPreTokenizerIsAnErrorListingTheSupportedOnes) {
  VocabBuilder b("gpt2", "not-a-pre-tokenizer");
  b.byte_alphabet();
  expect_error(b, {"tokenizer.ggml.pre", "not-a-pre-tokenizer", "llama-bpe", "qwen2"});
}

TEST(Vocab, MissingPreTokenizerMeansDefault) {
  VocabBuilder b("gpt2");
  b.byte_alphabet();
  EXPECT_TRUE(b.build().ok());
}

TEST(Vocab, TokenListMustExistAndBeStrings) {
  {
    VocabBuilder b = small_spm();
    b.omit("tokenizer.ggml.tokens");
    expect_error(b, {"tokenizer.ggml.tokens"});
  }
  {
    VocabBuilder b = small_spm();
    b.set("tokenizer.ggml.tokens", gguf::Value::u32(7));
    expect_error(b, {"tokenizer.ggml.tokens"});
  }
  {
    VocabBuilder b("llama");
    expect_error(b, {"tokenizer.ggml.tokens", "empty"});
  }
}

TEST(Vocab, ScoresAndTypesMustMatchTheTokenCount) {
  {
    VocabBuilder b = small_spm();
    b.set("tokenizer.ggml.scores", gguf::Value::f32_array({1.0f, 2.0f}));
    expect_error(b, {"tokenizer.ggml.scores", "2 entries"});
  }
  {
    VocabBuilder b = small_spm();
    b.set("tokenizer.ggml.token_type", gguf::Value::i32_array({1, 1, 1}));
    expect_error(b, {"tokenizer.ggml.token_type", "3 entries"});
  }
  {
    VocabBuilder b = small_spm();
    b.set("tokenizer.ggml.scores", gguf::Value::string_array(std::vector<std::string>(261, "x")));
    expect_error(b, {"tokenizer.ggml.scores"});
  }
}

TEST(Vocab, TokenTypesMustBeKnown) {
  VocabBuilder b = small_spm();
  std::vector<int32_t> types(b.texts().size(), 1);
  types[5] = 9;
  b.set("tokenizer.ggml.token_type", gguf::Value::i32_array(types));
  expect_error(b, {"tokenizer.ggml.token_type[5] = 9"});
}

TEST(Vocab, SpecialTokenIdsMustBeInRange) {
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
                          "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    VocabBuilder b = small_spm();
    b.set(key, gguf::Value::u32(100000));
    expect_error(b, {key, "100000", "outside the vocabulary"});
  }
  VocabBuilder b = small_spm();
  b.set("tokenizer.ggml.bos_token_id", gguf::Value::string("1"));
  expect_error(b, {"tokenizer.ggml.bos_token_id"});
}

TEST(Vocab, NegativeSpecialIdsMeanNone) {
  VocabBuilder b = small_bpe();
  b.set("tokenizer.ggml.eos_token_id", gguf::Value::i32(-1));
  auto t = b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->eos_id(), -1);
}

TEST(Vocab, AddingATokenThatDoesNotExistIsAnError) {
  VocabBuilder b = small_bpe();
  b.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(true));
  expect_error(b, {"add_bos_token", "no BOS"});
  VocabBuilder e = small_bpe();
  e.set("tokenizer.ggml.add_eos_token", gguf::Value::boolean(true));
  expect_error(e, {"add_eos_token", "no EOS"});
}

TEST(Vocab, DuplicateTokenTextsAreAnError) {
  VocabBuilder b = small_spm();
  b.add("a", -2);
  expect_error(b, {"duplicates", "token 260"});
}

TEST(Vocab, ByteTokensMustLookLikeBytes) {
  VocabBuilder b = small_spm();
  b.add("<0xZZ>", 0, test::kByte);
  expect_error(b, {"type byte", "<0xXX>"});
}

TEST(Vocab, MergesMustNameVocabularyTokens) {
  {
    VocabBuilder b = small_bpe();
    b.raw_merge("nospace");
    expect_error(b, {"tokenizer.ggml.merges[1]", "not two tokens"});
  }
  {
    VocabBuilder b = small_bpe();
    b.raw_merge("a ");
    expect_error(b, {"tokenizer.ggml.merges[1]", "not two tokens"});
  }
  {
    VocabBuilder b = small_bpe();
    b.raw_merge("a zzz");
    expect_error(b, {"tokenizer.ggml.merges[1]", "'zzz'", "not in the vocabulary"});
  }
  {
    VocabBuilder b = small_bpe();
    b.raw_merge("q r");  // both parts exist, "qr" does not
    expect_error(b, {"tokenizer.ggml.merges[1]", "'qr'", "not in the vocabulary"});
  }
  {
    VocabBuilder b = small_bpe();
    b.omit("tokenizer.ggml.merges");
    expect_error(b, {"tokenizer.ggml.merges"});
  }
}

TEST(Vocab, EmptyTokenTextsAreRenamedNotFatal) {
  VocabBuilder b = small_spm();
  const int32_t empty = b.add("", 0);
  auto t = b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->token_text(empty), "[EMPTY_" + std::to_string(empty) + "]");
}

TEST(Vocab, GarbageNeverCrashes) {
  // Random token texts and types (valid metadata shape): construction either succeeds or
  // fails cleanly, and encode/decode of random bytes never crash.
  uint32_t seed = 12345;
  auto rnd = [&]() {
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
  };
  for (int round = 0; round < 40; ++round) {
    const bool bpe = round % 2 == 1;
    VocabBuilder b(bpe ? "gpt2" : "llama", bpe ? "llama-bpe" : "");
    const int n = 20 + static_cast<int>(rnd() % 200);
    std::vector<int32_t> types;
    for (int i = 0; i < n; ++i) {
      std::string text;
      const int len = 1 + static_cast<int>(rnd() % 4);
      for (int k = 0; k < len; ++k) text.push_back(static_cast<char>("ab<>|\xC3\xA9 \n"[rnd() % 10]));
      if (i % 7 == 0) text += std::to_string(i);  // keep texts mostly unique
      b.add(text, -static_cast<float>(rnd() % 10), 1 + static_cast<int32_t>(rnd() % 5));
    }
    auto t = b.build();
    if (!t) continue;
    for (int k = 0; k < 20; ++k) {
      std::string text;
      const int len = static_cast<int>(rnd() % 40);
      for (int i = 0; i < len; ++i) text.push_back(static_cast<char>(rnd() & 0xFF));
      const auto toks = (*t)->encode(text, true, k % 2 == 0);
      for (int32_t id : toks) ASSERT_TRUE(id >= 0 && id < (*t)->n_vocab());
      (void)(*t)->decode(toks, true);
    }
  }
}

}  // namespace
}  // namespace cadenza
