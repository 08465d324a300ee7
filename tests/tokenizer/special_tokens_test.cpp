// Recognition of special-token text inside input (parse_special, user-defined tokens, strip
// flags), on hand-made vocabularies.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "vocab_builder.h"

namespace cadenza {
namespace {

using test::ids;
using test::VocabBuilder;

struct ChatVocab {
  VocabBuilder b{"gpt2", "qwen2"};
  int32_t start, end, tool, xy, yz1;
  ChatVocab() {
    b.byte_alphabet();
    start = b.add("<|im_start|>", 0, test::kControl);
    end = b.add("<|im_end|>", 0, test::kControl);
    tool = b.add("<tool>", 0, test::kUserDefined);
    xy = b.add("xy", 0, test::kUserDefined);
    yz1 = b.add("yz1", 0, test::kUserDefined);
  }
};

std::vector<int32_t> bytes_of(std::string_view s) {
  std::vector<int32_t> out;
  for (char c : s) out.push_back(static_cast<uint8_t>(c));
  return out;
}

TEST(SpecialTokens, ControlTokensAreParsedOnlyWhenAsked) {
  ChatVocab v;
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("<|im_start|>a<|im_end|>", false, true), ids({v.start, 'a', v.end}));
  // As plain text, "<|im_start|>" is pre-tokenized and byte-encoded like any other text.
  const auto plain = t->encode("<|im_start|>", false, false);
  EXPECT_EQ(plain, bytes_of("<|im_start|>"));
  EXPECT_EQ(t->decode(plain), "<|im_start|>");
}

TEST(SpecialTokens, UserDefinedTokensAreAlwaysRecognized) {
  ChatVocab v;
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("a<tool>b", false, false), ids({'a', v.tool, 'b'}));
  EXPECT_EQ(t->encode("a<tool>b", false, true), ids({'a', v.tool, 'b'}));
  // User-defined tokens render as their text even without render_special.
  EXPECT_EQ(t->decode(ids({'a', v.tool, 'b'})), "a<tool>b");
  EXPECT_EQ(t->decode(ids({v.start, 'a'})), "a");
  EXPECT_EQ(t->decode(ids({v.start, 'a'}), true), "<|im_start|>a");
}

TEST(SpecialTokens, LongerTokensWinOverlapsEvenWhenStartingLater) {
  // "yz1" (3 bytes) is claimed before "xy" (2 bytes) although "xy" starts first.
  ChatVocab v;
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("xyz1", false, false), ids({'x', v.yz1}));
  EXPECT_EQ(t->encode("xyxy", false, false), ids({v.xy, v.xy}));
  EXPECT_EQ(t->encode("xyz1xy", false, false), ids({'x', v.yz1, v.xy}));
}

TEST(SpecialTokens, AdjacentAndRepeatedTokens) {
  ChatVocab v;
  auto t = v.b.build_ok();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->encode("<|im_end|><|im_end|><tool>", false, true), ids({v.end, v.end, v.tool}));
  EXPECT_EQ(t->encode("<|im_end|", false, true), bytes_of("<|im_end|"));
}

TEST(SpecialTokens, SpmAddsASpaceAfterEachSpecialToken) {
  VocabBuilder b("llama");
  b.spm_basics();
  const int32_t sp = b.add("\xE2\x96\x81", -1);
  const int32_t sp_a = b.add("\xE2\x96\x81" "a", -1);
  const int32_t a = b.add("a", -2);
  auto t = b.build_ok();
  ASSERT_TRUE(t);
  // As the reference: the fragment after a special token gets the space prefix too.
  EXPECT_EQ(t->encode("<s>a</s>a", false, true), ids({1, sp_a, 2, sp_a}));
  EXPECT_EQ(t->encode("a<s>", true, true), ids({1, sp_a, 1}));
  (void)sp;
  (void)a;
}

TEST(SpecialTokens, Phi3ChatTokensSwallowTheWhitespaceAfterThem) {
  // The reference gives Phi-3's special tokens an rstrip flag (keyed on general.name).
  for (bool phi3 : {true, false}) {
    VocabBuilder b("llama");
    b.spm_basics();
    const int32_t sp_h = b.add("\xE2\x96\x81h", -1);
    b.add("h", -2);
    const int32_t user = b.add("<|user|>", 0, test::kControl);
    if (phi3) b.set("general.name", gguf::Value::string("Phi3"));
    auto t = b.build_ok();
    ASSERT_TRUE(t);
    const auto got = t->encode("<|user|>\n h", false, true);
    if (phi3) {
      EXPECT_EQ(got, ids({user, sp_h}));
    } else {
      // "▁\n▁h": the lone "▁" is no token here, so it falls back to its three bytes.
      EXPECT_EQ(got, ids({user, VocabBuilder::spm_byte(0xE2), VocabBuilder::spm_byte(0x96),
                          VocabBuilder::spm_byte(0x81), VocabBuilder::spm_byte('\n'), sp_h}));
    }
  }
}

}  // namespace
}  // namespace cadenza
