// SentencePiece-style ("llama") tokenization on hand-made vocabularies.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "vocab_builder.h"

namespace cadenza {
namespace {

using test::ids;
using test::VocabBuilder;

constexpr const char* kSp = "\xE2\x96\x81";  // U+2581, SentencePiece's space

struct AbcVocab {
  VocabBuilder b{"llama"};
  int32_t sp, a, bb, c, ab, bc, sp_a;
  AbcVocab(float ab_score, float bc_score) {
    b.spm_basics();
    sp = b.add(kSp, -1);
    a = b.add("a", -1);
    bb = b.add("b", -1);
    c = b.add("c", -1);
    ab = b.add("ab", ab_score);
    bc = b.add("bc", bc_score);
    sp_a = b.add(std::string(kSp) + "a", -3);
  }
};

TEST(Spm, HighestScoringPairMergesFirst) {
  {
    AbcVocab v(-2.0f, -0.5f);  // "bc" beats "ab"
    auto t = v.b.build_ok();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->encode("abc", false, false), ids({v.sp_a, v.bc}));
  }
  {
    AbcVocab v(-0.5f, -2.0f);  // "ab" beats "bc"; "▁ab" is no token, so "▁" stays alone
    auto t = v.b.build_ok();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->encode("abc", false, false), ids({v.sp, v.ab, v.c}));
  }
}

TEST(Spm, EqualScoresMergeLeftmostFirst) {
  AbcVocab v(-1.0f, -1.0f);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  // "▁a" (-3) loses to both; "ab" and "bc" tie and the leftmost wins.
  EXPECT_EQ(t->encode("abc", false, false), ids({v.sp, v.ab, v.c}));
}

TEST(Spm, UnknownCharactersFallBackToByteTokens) {
  AbcVocab v(-1, -1);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  // U+00E9 is not in the vocabulary: its two UTF-8 bytes become <0xC3> <0xA9>.
  EXPECT_EQ(t->encode("\xC3\xA9", false, false),
            ids({v.sp, VocabBuilder::spm_byte(0xC3), VocabBuilder::spm_byte(0xA9)}));
  // Invalid UTF-8 is kept byte for byte; a stray lead byte does not swallow the escaped space
  // after it (which would then decode as U+2581 instead of a space).
  for (const std::string bad : {"a\xFF\x80z", "\xEF\x05 b", "\xF0 a", "x\xE2\x96"}) {
    EXPECT_EQ(t->decode(t->encode(bad, false, false)), bad);
  }
  EXPECT_EQ(t->encode("\xC3 a", false, false),
            ids({v.sp, VocabBuilder::spm_byte(0xC3), v.sp_a}));
}

TEST(Spm, SpacesAreEscapedAndPrefixed) {
  AbcVocab v(-1, -1);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  // "a b" -> "▁a▁b": the prefix space and the inner space are both U+2581.
  EXPECT_EQ(t->encode("a b", false, false), ids({v.sp_a, v.sp, v.bb}));
  // Tabs and newlines are not escaped: they are byte tokens.
  EXPECT_EQ(t->encode("\t", false, false), ids({v.sp, VocabBuilder::spm_byte('\t')}));
  EXPECT_TRUE(t->encode("", false, false).empty());
}

TEST(Spm, AddSpacePrefixKeyTurnsThePrefixOff) {
  AbcVocab v(-1, -1);
  v.b.set("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(false));
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("a", false, false), ids({v.a}));
  EXPECT_EQ(t->decode(ids({v.sp, v.a})), " a");  // nothing to strip without the prefix
}

TEST(Spm, BosAndEosFollowMetadataAndDefaults) {
  AbcVocab v(-1, -1);
  {
    auto t = v.b.build_ok();  // keys absent: SentencePiece adds BOS, not EOS
    ASSERT_TRUE(t);
    EXPECT_EQ(t->bos_id(), 1);
    EXPECT_EQ(t->eos_id(), 2);
    EXPECT_EQ(t->encode("a", true, false), ids({1, v.sp_a}));
    EXPECT_EQ(t->encode("", true, false), ids({1}));
    EXPECT_TRUE(t->is_end_of_generation(2));
    EXPECT_FALSE(t->is_end_of_generation(1));
  }
  v.b.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(false));
  v.b.set("tokenizer.ggml.add_eos_token", gguf::Value::boolean(true));
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("a", true, false), ids({v.sp_a, 2}));
  EXPECT_EQ(t->encode("a", false, false), ids({v.sp_a}));
}

TEST(Spm, DecodeRemovesTheFirstTokensLeadingSpaceOnly) {
  AbcVocab v(-1, -1);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->decode(t->encode("a b", false, false)), "a b");
  EXPECT_EQ(t->decode(t->encode("  a", false, false)), "  a");  // "▁▁▁a": one space removed
  // As the reference: the removal applies to the first id even when it renders as nothing, so
  // after a BOS the space stays. Callers decoding a prompt drop the BOS first.
  EXPECT_EQ(t->decode(ids({1, v.sp_a})), " a");
  EXPECT_EQ(t->decode(ids({1, v.sp_a}), /*render_special=*/true), "<s> a");
  EXPECT_EQ(t->token_piece(v.sp_a), " a");
  EXPECT_EQ(t->token_piece(1), "");
  EXPECT_EQ(t->token_piece(1, true), "<s>");
  EXPECT_EQ(t->token_piece(0), "");  // <unk> renders like a control token
  EXPECT_EQ(t->token_piece(VocabBuilder::spm_byte('\n')), "\n");
  EXPECT_EQ(t->token_piece(-1), "");
  EXPECT_EQ(t->token_piece(1 << 30), "");
  EXPECT_EQ(t->decode(ids({-5, v.a, 99999})), "a");
}

TEST(Spm, U2581InInputDecodesAsASpace) {
  // A known, inherent ambiguity of SentencePiece vocabularies: the escape character itself
  // cannot be told apart from an escaped space.
  AbcVocab v(-1, -1);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->decode(t->encode(std::string("a") + kSp + "b", false, false)), "a b");
}

TEST(Spm, AccessorsReportTheVocabulary) {
  AbcVocab v(-1, -1);
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->n_vocab(), static_cast<int32_t>(v.b.texts().size()));
  EXPECT_EQ(t->unk_id(), 0);
  EXPECT_TRUE(t->add_bos());
  EXPECT_FALSE(t->add_eos());
  EXPECT_TRUE(t->is_control(1));
  EXPECT_FALSE(t->is_control(v.a));
  EXPECT_FALSE(t->is_control(-1));
  EXPECT_EQ(t->token_text(v.sp_a), std::string(kSp) + "a");
  EXPECT_EQ(t->token_text(123456), "");
  EXPECT_EQ(t->find_token("bc"), v.bc);
  EXPECT_EQ(t->find_token("zz"), std::nullopt);
}

}  // namespace
}  // namespace cadenza
