// Unigram (tokenizer.ggml.model "t5") on hand-made vocabularies: the Viterbi path by piece
// scores (ties included), unknown runs and byte fallback, SentencePiece's whitespace rules, and
// normalization through a hand-built precompiled charsmap.
#include <gtest/gtest.h>

#include "charsmap_builder.h"
#include "tokenizer/sp_normalizer.h"
#include "tokenizer/tokenizer.h"
#include "vocab_builder.h"

namespace cadenza {
namespace {

using test::ids;
using test::kByte;
using test::kControl;
using test::VocabBuilder;

const std::string kSp = "\xE2\x96\x81";  // U+2581

// T5 layout: <pad> 0, </s> 1, <unk> 2, then pieces with log-probability scores.
struct T5Vocab {
  VocabBuilder b{"t5"};
  T5Vocab() {
    b.add("<pad>", 0, kControl);
    b.add("</s>", 0, kControl);
    b.add("<unk>", 0, test::kUnknown);
    b.set("tokenizer.ggml.padding_token_id", gguf::Value::u32(0));
    b.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(1));
    b.set("tokenizer.ggml.unknown_token_id", gguf::Value::u32(2));
  }
  int32_t add(const std::string& text, float score, int32_t type = test::kNormal) {
    return b.add(text, score, type);
  }
  void charsmap(const std::map<std::string, std::string>& rules) {
    const std::vector<uint8_t> bytes = test::build_charsmap(rules);
    std::vector<gguf::Value> items;
    for (uint8_t x : bytes) items.push_back(gguf::Value::u8(x));
    b.set("tokenizer.ggml.precompiled_charsmap",
          gguf::Value::array(gguf::ValueType::UINT8, std::move(items)));
  }
};

TEST(Unigram, ViterbiMaximizesTheTotalScoreNotTheFirstPiece) {
  T5Vocab v;
  const int32_t sp_ab = v.add(kSp + "ab", -5), sp_a = v.add(kSp + "a", -1), b = v.add("b", -1);
  v.add(kSp, -2);
  v.add("a", -2);
  {
    auto t = v.b.build_ok();
    ASSERT_TRUE(t);
    // "▁ab" alone: -5; "▁a" + "b": -2.
    EXPECT_EQ(t->encode("ab", false, false), ids({sp_a, b}));
  }
  T5Vocab w;
  const int32_t w_sp_ab = w.add(kSp + "ab", -1.5f);
  w.add(kSp + "a", -1);
  w.add("b", -1);
  auto t = w.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("ab", false, false), ids({w_sp_ab}));  // -1.5 beats -2
  (void)sp_ab;
}

TEST(Unigram, TiesKeepThePathWhoseLastPieceStartsEarliest) {
  T5Vocab v;
  const int32_t sp_a = v.add(kSp + "a", -1), bc = v.add("bc", -2), sp_ab = v.add(kSp + "ab", -2),
                c = v.add("c", -1);
  v.add("b", -4);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  // "▁a"+"bc" and "▁ab"+"c" both score -3; "bc" starts before "c", so its path is found first
  // and kept (SentencePiece replaces a node only for a strictly better score).
  EXPECT_EQ(t->encode("abc", false, false), ids({sp_a, bc}));
  (void)sp_ab;
  (void)c;
}

TEST(Unigram, UnknownCharactersFuseIntoOneUnknownToken) {
  T5Vocab v;
  const int32_t sp_a = v.add(kSp + "a", -1), a = v.add("a", -2), sp = v.add(kSp, -3);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("azz\xC3\xA9" "a", false, false), ids({sp_a, 2, a}));
  EXPECT_EQ(t->encode("zz", false, false), ids({sp, 2}));
  EXPECT_EQ(t->decode(t->encode("azza", false, false)), "aa");  // <unk> renders as nothing
}

TEST(Unigram, ByteTokensMeanByteFallback) {
  T5Vocab v;
  for (int x = 0; x < 256; ++x) v.add(fmt::format("<0x{:02X}>", x), 0, kByte);
  const int32_t sp_a = v.add(kSp + "a", -1);
  v.add(kSp, -3);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  // 3 + byte: the <0xXX> ids.
  EXPECT_EQ(t->encode("a\xC3\xA9z", false, false), ids({sp_a, 3 + 0xC3, 3 + 0xA9, 3 + 'z'}));
  EXPECT_EQ(t->decode(t->encode("a\xC3\xA9z", false, false)), "a\xC3\xA9z");
}

TEST(Unigram, UnusedPiecesAreNeverUsed) {
  T5Vocab v;
  v.add(kSp + "ab", 0, test::kUnused);
  const int32_t sp_a = v.add(kSp + "a", -1), b = v.add("b", -1);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("ab", false, false), ids({sp_a, b}));
}

TEST(Unigram, WhitespaceIsEscapedPrefixedAndSqueezed) {
  T5Vocab v;
  const int32_t sp_a = v.add(kSp + "a", -1), sp_b = v.add(kSp + "b", -1), sp = v.add(kSp, -2),
                a = v.add("a", -3);
  {
    auto t = v.b.build_ok();  // remove_extra_whitespaces absent: SentencePiece's default (true)
    ASSERT_TRUE(t);
    EXPECT_EQ(t->encode("  a   b  ", false, false), ids({sp_a, sp_b}));
    EXPECT_TRUE(t->encode("   ", false, false).empty());
    EXPECT_EQ(t->decode(ids({sp_a, sp_b})), "a b");
  }
  v.b.set("tokenizer.ggml.remove_extra_whitespaces", gguf::Value::boolean(false));
  {
    auto t = v.b.build_ok();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->encode(" a  b", false, false), ids({sp, sp_a, sp, sp_b}));
  }
  v.b.set("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(false));
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("a b", false, false), ids({a, sp_b}));
}

TEST(Unigram, EosIsAppendedByDefaultNotBos) {
  T5Vocab v;
  const int32_t sp_a = v.add(kSp + "a", -1);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->add_bos());
  EXPECT_TRUE(t->add_eos());
  EXPECT_EQ(t->encode("a", true, false), ids({sp_a, 1}));
  // Text after a special token gets its own dummy prefix.
  EXPECT_EQ(t->encode("a</s>a", false, true), ids({sp_a, 1, sp_a}));
}

TEST(Unigram, NeedsAnUnknownToken) {
  VocabBuilder b("t5");
  b.add("a", -1);
  auto t = b.build("bad.gguf");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().find("unknown token"), std::string::npos) << t.error();
  b.add("<unk>", 0, test::kUnknown);  // found by its type without the key
  EXPECT_TRUE(b.build().ok());
}

TEST(Unigram, PrecompiledCharsmapNormalizes) {
  T5Vocab v;
  const int32_t sp_abc = v.add(kSp + "abc", -1), sp_x = v.add(kSp + "x", -1), a = v.add("a", -2),
                sp_a = v.add(kSp + "a", -2), fi = v.add(kSp + "fi", -1),
                sp_b = v.add(kSp + "b", -1);
  v.charsmap({{"\xEF\xBC\xA1", "a"},       // Ａ (fullwidth) -> a
              {"B", "b"},                  // B -> b
              {"BC", "x"},                 // a longer key wins over "B"
              {"\xEF\xAC\x81", "fi"},      // ﬁ ligature -> fi
              {"\t", " "},                 // tab -> space
              {"\x01", ""}});              // a control character is dropped
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("\xEF\xBC\xA1" "bc", false, false), ids({sp_abc}));
  EXPECT_EQ(t->encode("BC", false, false), ids({sp_x}));
  EXPECT_EQ(t->encode("B", false, false), ids({sp_b}));
  EXPECT_EQ(t->encode("\xEF\xAC\x81", false, false), ids({fi}));
  EXPECT_EQ(t->encode("\ta\x01\t\t", false, false), ids({sp_a}));  // tabs are spaces, squeezed
  EXPECT_EQ(t->encode("a\x01" "a", false, false), ids({sp_a, a}));
}

TEST(SpNormalizer, RulesAndMalformedCharsmaps) {
  auto n = tok::SpNormalizer::build(test::build_charsmap({{"x", "yy"}, {"xz", ""}}), false);
  ASSERT_TRUE(n.ok()) << n.error();
  std::string out;
  n->normalize("axzx b\xFF", /*add_dummy_prefix=*/true, out);
  EXPECT_EQ(out, kSp + "ayy" + kSp + "b\xEF\xBF\xBD");  // an invalid byte becomes U+FFFD
  EXPECT_FALSE(tok::SpNormalizer::build({1, 2, 3}, false).ok());               // no header
  EXPECT_FALSE(tok::SpNormalizer::build({8, 0, 0, 0, 1, 2, 3, 4}, false).ok());  // past the end
  EXPECT_FALSE(tok::SpNormalizer::build({3, 0, 0, 0, 1, 2, 3}, false).ok());  // not 4-aligned
  // Arbitrary trie contents never read outside the arrays.
  std::vector<uint8_t> junk = {16, 0, 0, 0};
  for (int i = 0; i < 16; ++i) junk.push_back(static_cast<uint8_t>(0x5A ^ (i * 37)));
  junk.push_back('q');
  auto j = tok::SpNormalizer::build(junk, true);
  ASSERT_TRUE(j.ok());
  const std::string inputs[] = {"abc", "\xFF\xFE", "ZZZZ", std::string(1, '\0')};
  for (const std::string& s : inputs) {
    out.clear();
    j->normalize(s, true, out);
  }
}

}  // namespace
}  // namespace cadenza
