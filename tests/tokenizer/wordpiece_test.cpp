// WordPiece (tokenizer.ggml.model "bert") on hand-made vocabularies: BERT's normalization and
// pre-tokenization, greedy longest-match-first with U+2581-prefixed word-initial pieces, [UNK]
// for whole words, [CLS]/[SEP]; and the Unicode tables behind the normalization.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_tables.h"
#include "tokenizer/wordpiece.h"
#include "vocab_builder.h"

namespace cadenza {
namespace {

using test::ids;
using test::kControl;
using test::VocabBuilder;

const std::string kW = "\xE2\x96\x81";  // U+2581: the word-initial marker in GGUF

// [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4, then pieces.
struct BertVocab {
  VocabBuilder b{"bert", "bert-bge"};
  BertVocab() {
    b.add("[PAD]", 0, kControl);
    b.add("[UNK]", 0, kControl);
    b.add("[CLS]", 0, kControl);
    b.add("[SEP]", 0, kControl);
    b.add("[MASK]", 0, kControl);
    b.set("tokenizer.ggml.unknown_token_id", gguf::Value::u32(1));
    b.set("tokenizer.ggml.cls_token_id", gguf::Value::u32(2));
    b.set("tokenizer.ggml.seperator_token_id", gguf::Value::u32(3));
    b.set("tokenizer.ggml.padding_token_id", gguf::Value::u32(0));
  }
  int32_t word(const std::string& w) { return b.add(kW + w); }
  int32_t cont(const std::string& w) { return b.add(w); }
};

TEST(WordPiece, GreedyLongestMatchFirstNotFewestPieces) {
  BertVocab v;
  const int32_t ab = v.word("ab"), a = v.word("a"), bcd = v.cont("bcd"), c = v.cont("c"),
                d = v.cont("d"), b = v.cont("b");
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  // "▁a" + "bcd" would be two pieces; the longest first piece "▁ab" wins anyway.
  EXPECT_EQ(t->encode("abcd", false, false), ids({ab, c, d}));
  EXPECT_EQ(t->encode("abd", false, false), ids({ab, d}));
  EXPECT_EQ(t->encode("a", false, false), ids({a}));
  EXPECT_EQ(t->encode("abb", false, false), ids({ab, b}));
  (void)bcd;
}

TEST(WordPiece, WordInitialAndContinuationPiecesDiffer) {
  BertVocab v;
  const int32_t wb = v.word("b"), b = v.cont("b");
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("bb b", false, false), ids({wb, b, wb}));
  // A word cannot start with a continuation piece: "▁x" is missing, so "xb" is unknown.
  v.cont("x");
  auto t2 = v.b.build_ok();
  ASSERT_TRUE(t2);
  EXPECT_EQ(t2->encode("xb", false, false), ids({1}));
}

TEST(WordPiece, AWordThatCannotBeCoveredIsOneUnknownToken) {
  BertVocab v;
  const int32_t ab = v.word("ab"), c = v.word("c");
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  // "▁ab" matches, then "z" cannot: the whole word is [UNK], not "▁ab" + [UNK].
  EXPECT_EQ(t->encode("abz c", false, false), ids({1, c}));
  EXPECT_EQ(t->encode("ab", false, false), ids({ab}));
  // Over 100 characters: unknown without trying (BERT's max_input_chars_per_word).
  v.cont("a");
  auto t2 = v.b.build_ok();
  ASSERT_TRUE(t2);
  std::string long_word = "ab" + std::string(98, 'a');
  EXPECT_EQ(t2->encode(long_word, false, false).size(), 99u);
  EXPECT_EQ(t2->encode(long_word + "a", false, false), ids({1}));
}

TEST(WordPiece, PunctuationIsAlwaysAWordOfItsOwn) {
  BertVocab v;
  const int32_t a = v.word("a"), comma = v.word(","), dollar = v.word("$"),
                inv = v.word("\xC2\xBF"), half = v.word("a\xC2\xBD");
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("a,a", false, false), ids({a, comma, a}));
  EXPECT_EQ(t->encode(",,", false, false), ids({comma, comma}));
  EXPECT_EQ(t->encode("$a", false, false), ids({dollar, a}));  // ASCII symbols count
  EXPECT_EQ(t->encode("\xC2\xBF" "a", false, false), ids({inv, a}));  // "¿" is Po
  EXPECT_EQ(t->encode("a\xC2\xBD", false, false), ids({half}));  // "½" is No: not split
}

TEST(WordPiece, WhitespaceControlsAndIdeographs) {
  BertVocab v;
  const int32_t a = v.word("a"), b = v.word("b"), ab = v.word("ab"), zh = v.word("\xE4\xB8\xAD"),
                wen = v.word("\xE6\x96\x87");
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  // Tab, newline, no-break space and ideographic space separate words.
  EXPECT_EQ(t->encode("a\tb\na\xC2\xA0" "b\xE3\x80\x80" "a", false, false), ids({a, b, a, b, a}));
  // Zero-width joiner (Cf), NUL, U+FFFD and invalid bytes are dropped: "ab" stays one word.
  EXPECT_EQ(t->encode("a\xE2\x80\x8D" "b", false, false), ids({ab}));
  EXPECT_EQ(t->encode(std::string("a\0b", 3), false, false), ids({ab}));
  EXPECT_EQ(t->encode("a\xFF" "b", false, false), ids({ab}));
  // Each CJK ideograph is a word.
  EXPECT_EQ(t->encode("a\xE4\xB8\xAD\xE6\x96\x87" "b", false, false), ids({a, zh, wen, b}));
  EXPECT_TRUE(t->encode(" \t\n ", false, false).empty());
}

TEST(WordPiece, UncasedVocabulariesLowercaseAndStripAccents) {
  BertVocab v;
  const int32_t hello = v.word("hello"), cua = v.word("cua"), i_dot = v.word("i");
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("HeLLo", false, false), ids({hello}));
  EXPECT_EQ(t->encode("H\xC3\xA9llo", false, false), ids({hello}));    // é
  EXPECT_EQ(t->encode("C\xE1\xBB\xAD" "a", false, false), ids({cua}));  // ử (two marks)
  // A combining mark in the input is dropped: "h" + U+0301 + "ello" is "hello"; "e" + U+0301 +
  // "llo" is "ello", which no piece starts.
  EXPECT_EQ(t->encode("e\xCC\x81llo", false, false), ids({1}));
  EXPECT_EQ(t->encode("h\xCC\x81" "ello", false, false), ids({hello}));
  EXPECT_EQ(t->encode("\xC4\xB0", false, false), ids({i_dot}));  // İ: stripped, then lowercased
}

TEST(WordPiece, CasedOrAccentedVocabulariesKeepThatInformation) {
  {
    BertVocab v;
    const int32_t upper = v.word("Hello"), lower = v.word("hello");
    auto t = v.b.build_ok();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->encode("Hello hello", false, false), ids({upper, lower}));
    EXPECT_EQ(t->encode("HELLO", false, false), ids({1}));
  }
  {
    BertVocab v;
    const int32_t e_acute = v.word("\xC3\xA9"), e = v.word("e");
    auto t = v.b.build_ok();
    ASSERT_TRUE(t);
    // Lowercased (no uppercase piece), but accents kept (an accented piece exists).
    EXPECT_EQ(t->encode("\xC3\x89 E", false, false), ids({e_acute, e}));
  }
}

TEST(WordPiece, ClsAndSepWrapTheTextAndDecodeJoinsPieces) {
  BertVocab v;
  const int32_t hello = v.word("hello"), wor = v.word("wor"), ld = v.cont("ld"),
                bang = v.word("!");
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->bos_id(), 2);
  EXPECT_EQ(t->eos_id(), 3);
  EXPECT_EQ(t->unk_id(), 1);
  EXPECT_EQ(t->encode("hello world!", true, false), ids({2, hello, wor, ld, bang, 3}));
  EXPECT_EQ(t->encode("", true, false), ids({2, 3}));
  EXPECT_EQ(t->encode("[CLS] hello", false, true), ids({2, hello}));
  EXPECT_EQ(t->decode(ids({2, hello, wor, ld, bang, 3})), " hello world !");
  EXPECT_EQ(t->decode(ids({hello, wor, ld})), "hello world");
  v.b.set("tokenizer.ggml.add_eos_token", gguf::Value::boolean(false));
  auto t2 = v.b.build_ok();
  ASSERT_TRUE(t2);
  EXPECT_EQ(t2->encode("hello", true, false), ids({2, hello}));
}

TEST(WordPiece, PreTokenizerNameIsNotConsulted) {
  BertVocab v;
  v.word("a");
  v.b.set("tokenizer.ggml.pre", gguf::Value::string("jina-v2-en"));
  EXPECT_TRUE(v.b.build().ok());
}

TEST(UnicodeTables, CategoriesCaseAndAccents) {
  using namespace tok;
  EXPECT_TRUE(is_other_category(0x200D));    // ZWJ, Cf
  EXPECT_TRUE(is_other_category(0x7F));      // DEL, Cc
  EXPECT_TRUE(is_other_category(0xE000));    // private use
  EXPECT_TRUE(is_other_category(0x378));     // unassigned
  EXPECT_FALSE(is_other_category('a'));
  EXPECT_TRUE(is_punctuation_category(0xBF));    // ¿
  EXPECT_TRUE(is_punctuation_category(0x3002));  // 。
  EXPECT_FALSE(is_punctuation_category('$'));    // Sc: a symbol, not punctuation
  EXPECT_FALSE(is_punctuation_category(0xFF5E));  // ～ is Sm
  EXPECT_TRUE(is_nonspacing_mark(0x301));
  EXPECT_TRUE(is_nonspacing_mark(0xFE0F));  // variation selector
  EXPECT_FALSE(is_nonspacing_mark('e'));
  EXPECT_TRUE(is_white_space(0x3000));
  EXPECT_FALSE(is_white_space(0x200B));  // zero-width space is Cf, not White_Space
  auto lower = [](uint32_t cp) {
    std::string s;
    append_lowercase(cp, s);
    return s;
  };
  EXPECT_EQ(lower('A'), "a");
  EXPECT_EQ(lower('a'), "a");
  EXPECT_EQ(lower(0x3A3), "\xCF\x83");      // Σ -> σ (no final-sigma context per character)
  EXPECT_EQ(lower(0x100), "\xC4\x81");      // Ā -> ā (a stride-2 run)
  EXPECT_EQ(lower(0x101), "\xC4\x81");      // ā stays
  EXPECT_EQ(lower(0x130), "i\xCC\x87");     // İ -> i + U+0307
  EXPECT_EQ(lower(0x10400), "\xF0\x90\x90\xA8");  // Deseret
  auto strip = [](uint32_t cp) {
    std::string s;
    append_stripped_accents(cp, s);
    return s;
  };
  EXPECT_EQ(strip(0xE9), "e");
  EXPECT_EQ(strip(0x1EC7), "e");  // ệ: two marks
  EXPECT_EQ(strip(0x301), "");    // a lone combining acute
  EXPECT_EQ(strip(0xBD), "\xC2\xBD");  // ½ has only a compatibility decomposition
  EXPECT_EQ(strip(0xD55C), "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB");  // 한 -> ᄒ ᅡ ᆫ
  EXPECT_EQ(strip(0xF900), "\xE8\xB1\x88");  // a compatibility ideograph -> U+8C48
  EXPECT_TRUE(is_cjk_ideograph(0x4E2D));
  EXPECT_FALSE(is_cjk_ideograph(0x3042));  // hiragana
}

}  // namespace
}  // namespace cadenza
