// Byte-level BPE ("gpt2") tokenization and pre-tokenizers on hand-made vocabularies.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "vocab_builder.h"

namespace cadenza {
namespace {

using test::ids;
using test::VocabBuilder;

constexpr const char* kG = "\xC4\xA0";  // "Ġ", the stand-in of the space byte

std::vector<std::string> pieces(std::string_view pre, std::string_view text) {
  const tok::PreTokenizerSpec* spec = tok::find_pretokenizer(pre);
  EXPECT_NE(spec, nullptr) << pre;
  if (spec == nullptr) return {};
  auto pt = tok::PreTokenizer::compile(*spec);
  EXPECT_TRUE(pt.ok()) << (pt ? "" : pt.error());
  if (!pt) return {};
  std::vector<std::string_view> views;
  pt->split(text, views);
  return {views.begin(), views.end()};
}

using S = std::vector<std::string>;

TEST(PreTokenizer, EveryTableEntryCompiles) {
  for (std::string_view name :
       {"default", "gpt-2", "llama-bpe", "dbrx", "glm4", "qwen2", "deepseek-llm", "deepseek-coder",
        "deepseek-v3", "falcon", "starcoder", "tekken", "gpt-4o", "seed-coder", "bloom"}) {
    const tok::PreTokenizerSpec* spec = tok::find_pretokenizer(name);
    ASSERT_NE(spec, nullptr) << name;
    auto pt = tok::PreTokenizer::compile(*spec);
    EXPECT_TRUE(pt.ok()) << name << ": " << (pt ? "" : pt.error());
  }
  EXPECT_EQ(tok::find_pretokenizer("no-such-thing"), nullptr);
  EXPECT_EQ(tok::find_pretokenizer(""), tok::find_pretokenizer("default"));
}

TEST(PreTokenizer, Gpt2SplitsWordsWithTheirLeadingSpace) {
  EXPECT_EQ(pieces("gpt-2", "Hello world  again!!"),
            (S{"Hello", " world", " ", " again", "!!"}));
  EXPECT_EQ(pieces("gpt-2", "it's 2024"), (S{"it", "'s", " 2024"}));
  EXPECT_EQ(pieces("gpt-2", ""), S{});
}

TEST(PreTokenizer, Llama3GroupsDigitsByThreeAndFoldsContractionCase) {
  EXPECT_EQ(pieces("llama-bpe", "1234567"), (S{"123", "456", "7"}));
  EXPECT_EQ(pieces("llama-bpe", "IT'S"), (S{"IT", "'S"}));
  EXPECT_EQ(pieces("llama-bpe", "a\n\nb"), (S{"a", "\n\n", "b"}));
}

TEST(PreTokenizer, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(pieces("qwen2", "x=1234"), (S{"x", "=", "1", "2", "3", "4"}));
}

TEST(PreTokenizer, SequencesKeepUnmatchedStretches) {
  // deepseek-llm applies six regexes in turn; the first isolates each newline, the CJK one
  // isolates Han runs, and nothing is lost.
  const auto p = pieces("deepseek-llm", "ab\n\n\xE4\xB8\xAD\xE6\x96\x87 12");
  std::string joined;
  for (const auto& s : p) joined += s;
  EXPECT_EQ(joined, "ab\n\n\xE4\xB8\xAD\xE6\x96\x87 12");
  EXPECT_EQ(p, (S{"ab", "\n", "\n", "\xE4\xB8\xAD\xE6\x96\x87", " ", "12"}));
}

TEST(PreTokenizer, InvalidUtf8IsKeptAndDoesNotStopMatching) {
  const std::string text = "ab\xFF\xC3 cd\x80";
  const auto p = pieces("llama-bpe", text);
  std::string joined;
  for (const auto& s : p) joined += s;
  EXPECT_EQ(joined, text);
  EXPECT_EQ(p.front(), "ab");
}

// A byte-level vocabulary where "the" and " the" have merges.
struct TheVocab {
  VocabBuilder b;
  int32_t he, g_t, g_the;
  explicit TheVocab(const std::string& pre) : b("gpt2", pre) {
    b.byte_alphabet();
    he = b.merge("h", "e");
    g_t = b.merge(kG, "t");
    g_the = b.merge(std::string(kG) + "t", "he");
  }
};

TEST(Bpe, MergesFollowRanks) {
  TheVocab v("gpt-2");
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode(" the", false, false), ids({v.g_the}));
  EXPECT_EQ(t->encode("the", false, false), ids({'t', v.he}));  // no "t he" rule
  EXPECT_EQ(t->encode("the the", false, false), ids({'t', v.he, v.g_the}));
  EXPECT_EQ(t->decode(t->encode("the the", false, false)), "the the");
}

TEST(Bpe, LowerRankWinsOverlaps) {
  for (bool ab_first : {true, false}) {
    VocabBuilder b("gpt2", "gpt-2");
    b.byte_alphabet();
    int32_t ab = -1, bc = -1;
    if (ab_first) {
      ab = b.merge("a", "b");
      bc = b.merge("b", "c");
    } else {
      bc = b.merge("b", "c");
      ab = b.merge("a", "b");
    }
    auto t = b.build_ok();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->encode("abc", false, false), ab_first ? ids({ab, 'c'}) : ids({'a', bc}));
    // Equal pairs: the leftmost merges first ("aaa" -> "aa" "a").
  }
  VocabBuilder b("gpt2", "gpt-2");
  b.byte_alphabet();
  const int32_t aa = b.merge("a", "a");
  auto t = b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("aaa", false, false), ids({aa, 'a'}));
}

TEST(Bpe, IgnoreMergesEmitsWholeWordTokens) {
  // Llama 3 ("llama-bpe"): a piece that is a token is used as is, even without merge rules.
  for (const char* pre : {"llama-bpe", "gpt-2"}) {
    VocabBuilder b("gpt2", pre);
    b.byte_alphabet();
    const int32_t xyz = b.add("xyz");
    auto t = b.build_ok();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->encode("xyz", false, false),
              std::string(pre) == "llama-bpe" ? ids({xyz}) : ids({'x', 'y', 'z'}));
  }
}

TEST(Bpe, BytesAreLosslessIncludingInvalidUtf8) {
  VocabBuilder b("gpt2", "llama-bpe");
  b.byte_alphabet();
  auto t = b.build_ok();
  ASSERT_TRUE(t);
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  const auto got = t->encode(all, false, false);
  EXPECT_EQ(got.size(), 256u);
  EXPECT_EQ(t->decode(got), all);
  // The space byte's token renders as a space, not as its stand-in.
  EXPECT_EQ(t->token_piece(' '), " ");
  EXPECT_EQ(t->token_text(' '), kG);
}

TEST(Bpe, SpecialTokenDefaultsDependOnThePreTokenizer) {
  for (const char* pre : {"llama-bpe", "qwen2"}) {
    VocabBuilder b("gpt2", pre);
    b.byte_alphabet();
    const int32_t bos = b.add("<|begin_of_text|>", 0, test::kControl);
    b.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(static_cast<uint32_t>(bos)));
    auto t = b.build_ok();
    ASSERT_TRUE(t);
    // Without tokenizer.ggml.add_bos_token: Llama 3 adds BOS, Qwen2 (like most BPE) does not.
    const bool llama = std::string(pre) == "llama-bpe";
    EXPECT_EQ(t->add_bos(), llama);
    EXPECT_EQ(t->encode("a", true, false), llama ? ids({bos, 'a'}) : ids({'a'}));
    EXPECT_EQ(t->eos_id(), -1);
  }
}

TEST(Bpe, ChatEndTokensAreEndOfGeneration) {
  VocabBuilder b("gpt2", "qwen2");
  b.byte_alphabet();
  const int32_t eos = b.add("<|endoftext|>", 0, test::kControl);
  const int32_t im_end = b.add("<|im_end|>", 0, test::kUserDefined);  // mistyped in some files
  const int32_t im_start = b.add("<|im_start|>", 0, test::kControl);
  b.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(static_cast<uint32_t>(eos)));
  auto t = b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->is_end_of_generation(eos));
  EXPECT_TRUE(t->is_end_of_generation(im_end));
  EXPECT_TRUE(t->is_control(im_end));  // recognised by its text, made a control token
  EXPECT_FALSE(t->is_end_of_generation(im_start));
  EXPECT_FALSE(t->is_end_of_generation('a'));
  EXPECT_FALSE(t->is_end_of_generation(-1));
}

}  // namespace
}  // namespace cadenza
