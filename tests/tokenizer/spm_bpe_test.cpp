// SentencePiece-style BPE (tokenizer.ggml.model "gemma4", Gemma 4) on hand-made vocabularies:
// spaces as U+2581, ranked merges over characters, newline runs cut apart, <0xXX> fallback.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "vocab_builder.h"

namespace cadenza {
namespace {

using test::ids;
using test::kByte;
using test::kControl;
using test::VocabBuilder;

constexpr const char* kSp = "\xE2\x96\x81";  // U+2581

// <pad> 0, <eos> 1, <bos> 2, <unk> 3 (the Gemma layout), then characters and merges.
struct GemmaVocab {
  VocabBuilder b{"gemma4"};
  int32_t sp, a, bb, c, nl, ab, bc, sp_a, nlnl;
  // ab_first: the merge "a b" ranks before "b c".
  explicit GemmaVocab(bool ab_first, bool byte_tokens = true) {
    b.add("<pad>", 0, kControl);
    b.add("<eos>", 0, kControl);
    b.add("<bos>", 0, kControl);
    b.add("<unk>", 0, test::kUnknown);
    if (byte_tokens) {
      for (int x = 0; x < 256; ++x) b.add(fmt::format("<0x{:02X}>", x), 0, kByte);
    }
    // Scores mean nothing here (Gemma 4 stores -1000 for all): give the later merge the higher
    // score to show that the rank alone decides.
    sp = b.add(kSp, -1000);
    a = b.add("a", -1000);
    bb = b.add("b", -1000);
    c = b.add("c", -1000);
    nl = b.add("\n", -1000);
    if (ab_first) {
      ab = b.merge("a", "b");
      bc = b.merge("b", "c");
    } else {
      bc = b.merge("b", "c");
      ab = b.merge("a", "b");
    }
    sp_a = b.merge(kSp, "a");
    nlnl = b.merge("\n", "\n");
    b.merge("a", "\n");  // never applies: newline runs are merged apart from other text
    b.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(2));
    b.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(1));
    b.set("tokenizer.ggml.unknown_token_id", gguf::Value::u32(3));
  }
  static int32_t byte(uint8_t x) { return 4 + x; }
};

TEST(SpmBpe, LowestRankedMergeFirstWhateverTheScores) {
  {
    GemmaVocab v(/*ab_first=*/true);
    auto t = v.b.build_ok();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->encode("abc", false, false), ids({v.ab, v.c}));
  }
  {
    GemmaVocab v(/*ab_first=*/false);
    auto t = v.b.build_ok();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->encode("abc", false, false), ids({v.a, v.bc}));
  }
}

TEST(SpmBpe, SpacesAreU2581WithoutAPrefixByDefault) {
  GemmaVocab v(true);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  // "a a" -> "a▁a": the space merges with the following letter.
  EXPECT_EQ(t->encode("a a", false, false), ids({v.a, v.sp_a}));
  EXPECT_EQ(t->encode(" ", false, false), ids({v.sp}));
  EXPECT_EQ(t->decode(ids({v.sp_a, v.sp_a})), " a a");  // no leading space removed
  v.b.set("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(true));
  auto p = v.b.build_ok();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->encode("a", false, false), ids({v.sp_a}));
  EXPECT_EQ(p->decode(ids({v.sp_a})), "a");
}

TEST(SpmBpe, NewlineRunsAreMergedApartFromTheRest) {
  GemmaVocab v(true);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  // "a\n" is a token with a merge rule, but the newline run is its own piece.
  ASSERT_TRUE(t->find_token("a\n"));
  EXPECT_EQ(t->encode("a\n", false, false), ids({v.a, v.nl}));
  EXPECT_EQ(t->encode("a\n\n\na", false, false), ids({v.a, v.nlnl, v.nl, v.a}));
  EXPECT_EQ(t->decode(t->encode("a\n\n\na", false, false)), "a\n\n\na");
}

TEST(SpmBpe, CharactersThatAreNoTokenFallBackToBytes) {
  {
    GemmaVocab v(true);
    auto t = v.b.build_ok();
    ASSERT_TRUE(t);
    // U+00E9 is no token: its bytes; "a" and "b" around it still merge with nothing across it.
    EXPECT_EQ(t->encode("a\xC3\xA9" "b", false, false),
              ids({v.a, GemmaVocab::byte(0xC3), GemmaVocab::byte(0xA9), v.bb}));
    EXPECT_EQ(t->decode(t->encode("a\xC3\xA9" "b", false, false)), "a\xC3\xA9" "b");
    // Invalid UTF-8: each byte on its own.
    EXPECT_EQ(t->encode("\xFF" "a", false, false), ids({GemmaVocab::byte(0xFF), v.a}));
  }
  {
    GemmaVocab v(true, /*byte_tokens=*/false);
    auto t = v.b.build_ok();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->encode("\xC3\xA9", false, false), ids({3, 3}));  // the unknown token per byte
  }
}

TEST(SpmBpe, BosByDefaultAndSpecialTokens) {
  GemmaVocab v(true);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->add_bos());
  EXPECT_FALSE(t->add_eos());
  EXPECT_EQ(t->encode("ab", true, false), ids({2, v.ab}));
  EXPECT_EQ(t->encode("<eos>ab", false, true), ids({1, v.ab}));
  EXPECT_TRUE(t->is_end_of_generation(1));
}

TEST(SpmBpe, MergesAreValidated) {
  GemmaVocab v(true);
  v.b.raw_merge("a zz");
  auto t = v.b.build("bad.gguf");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().find("tokenizer.ggml.merges"), std::string::npos) << t.error();
  VocabBuilder none("gemma4");
  none.add("a");
  none.omit("tokenizer.ggml.merges");
  EXPECT_FALSE(none.build().ok());
}

}  // namespace
}  // namespace cadenza
