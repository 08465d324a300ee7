// StreamingDetokenizer: characters split across tokens are held back, invalid bytes become
// U+FFFD, and the stream's concatenation equals decode().
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "shared_data.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_bytes.h"
#include "vocab_builder.h"

namespace cadenza {
namespace {

using test::ids;
using test::VocabBuilder;

constexpr std::string_view kFffd = "\xEF\xBF\xBD";

bool valid_utf8(std::string_view s) {
  while (!s.empty()) {
    const auto c = tok::check_utf8(s);
    if (c.kind != tok::Utf8Check::kComplete) return false;
    s.remove_prefix(c.length);
  }
  return true;
}

// Streams `tokens` one by one; checks every chunk is whole UTF-8; returns the concatenation.
std::string stream(const Tokenizer& t, const std::vector<int32_t>& tokens) {
  StreamingDetokenizer d(t);
  std::string all;
  for (int32_t id : tokens) {
    const std::string chunk = d.push(id);
    EXPECT_TRUE(valid_utf8(chunk)) << "partial UTF-8 emitted after token " << id;
    all += chunk;
  }
  const std::string last = d.finish();
  EXPECT_TRUE(valid_utf8(last));
  return all + last;
}

std::unique_ptr<Tokenizer> bytes_only_spm() {
  VocabBuilder b("llama");
  b.spm_basics();
  b.add("\xE2\x96\x81", -1);
  return b.build_ok();
}

int32_t byte(uint8_t b) { return VocabBuilder::spm_byte(b); }

TEST(Streaming, HoldsBackCharactersSplitAcrossByteTokens) {
  auto t = bytes_only_spm();
  ASSERT_TRUE(t);
  StreamingDetokenizer d(*t);
  // U+1F600 (4 bytes), one byte token at a time: nothing until the last byte.
  EXPECT_EQ(d.push(byte(0xF0)), "");
  EXPECT_EQ(d.push(byte(0x9F)), "");
  EXPECT_EQ(d.push(byte(0x98)), "");
  EXPECT_EQ(d.push(byte(0x80)), "\xF0\x9F\x98\x80");
  EXPECT_EQ(d.push(byte('a')), "a");
  EXPECT_EQ(d.finish(), "");
}

TEST(Streaming, EmojiAndCjkTextStreamsToItsDecode) {
  auto t = bytes_only_spm();
  ASSERT_TRUE(t);
  const std::string text = "\xF0\x9F\xA6\x99 \xE5\xA4\xA7\xE6\xA8\xA1\xE5\x9E\x8B \xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F caf\xC3\xA9";
  const auto tokens = t->encode(text, true, false);
  EXPECT_EQ(stream(*t, tokens), t->decode(tokens));
  EXPECT_EQ(t->decode(std::vector<int32_t>(tokens.begin() + 1, tokens.end())), text);
}

TEST(Streaming, InvalidBytesBecomeReplacementCharacters) {
  auto t = bytes_only_spm();
  ASSERT_TRUE(t);
  {
    StreamingDetokenizer d(*t);
    EXPECT_EQ(d.push(byte(0x80)), kFffd);  // a stray continuation byte: known invalid at once
    EXPECT_EQ(d.push(byte(0xC3)), "");
    EXPECT_EQ(d.push(byte('x')), std::string(kFffd) + "x");  // lead byte without continuation
    EXPECT_EQ(d.push(byte(0xE2)), "");
    EXPECT_EQ(d.push(byte(0x82)), "");
    EXPECT_EQ(d.finish(), kFffd);  // truncated at the end: one U+FFFD for the whole subpart
  }
  {
    StreamingDetokenizer d(*t);
    // Overlong (C0 80) and surrogate (ED A0 80) forms are invalid, byte by maximal subpart.
    EXPECT_EQ(d.push(byte(0xC0)), kFffd);
    EXPECT_EQ(d.push(byte(0x80)), kFffd);
    EXPECT_EQ(d.push(byte(0xED)), "");
    EXPECT_EQ(d.push(byte(0xA0)), std::string(kFffd) + std::string(kFffd));
    EXPECT_EQ(d.push(byte(0x80)), kFffd);
    EXPECT_EQ(d.finish(), "");
  }
}

TEST(Streaming, FinishResetsForANewStream) {
  auto t = bytes_only_spm();
  ASSERT_TRUE(t);
  StreamingDetokenizer d(*t);
  const auto tokens = t->encode("ab", false, false);  // "▁ab": the first piece's space is removed
  std::string first;
  for (int32_t id : tokens) first += d.push(id);
  first += d.finish();
  std::string second;
  for (int32_t id : tokens) second += d.push(id);
  second += d.finish();
  EXPECT_EQ(first, "ab");
  EXPECT_EQ(second, "ab");
}

// Generated tokens continue their prompt: the start-of-text space removal of decode() applies to
// the prompt's first token, never to the first generated one (the bug: "Once upon a timeof").
TEST(Streaming, AfterAPromptTheFirstTokenKeepsItsSpace) {
  auto t = bytes_only_spm();
  ASSERT_TRUE(t);
  const auto prompt = t->encode("x", true, false);  // BOS "▁" x
  const auto tokens = t->encode("ab", false, false);  // "▁" a b
  ASSERT_EQ(t->token_piece(tokens[0]), " ");
  StreamingDetokenizer after_prompt(*t, prompt);
  std::string text;
  for (int32_t id : tokens) text += after_prompt.push(id);
  text += after_prompt.finish();
  EXPECT_EQ(text, " ab");
  // Prompt text + streamed text is the decode of the whole sequence.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), tokens.begin(), tokens.end());
  EXPECT_EQ(t->decode(prompt) + text, t->decode(all));
  // finish() resets to the same place: still after the prompt.
  std::string again;
  for (int32_t id : tokens) again += after_prompt.push(id);
  EXPECT_EQ(again + after_prompt.finish(), " ab");
  // An empty context is the start of a text, as the standalone stream.
  StreamingDetokenizer no_context(*t, std::span<const int32_t>{});
  std::string start;
  for (int32_t id : tokens) start += no_context.push(id);
  EXPECT_EQ(start + no_context.finish(), "ab");
}

TEST(Streaming, RenderSpecialIsOptIn) {
  auto t = bytes_only_spm();
  ASSERT_TRUE(t);
  StreamingDetokenizer plain(*t);
  StreamingDetokenizer special(*t, true);
  EXPECT_EQ(plain.push(2), "");
  EXPECT_EQ(special.push(2), "</s>");
}

TEST(Streaming, ByteLevelBpeCutsInsideCharacters) {
  // Only single bytes in the vocabulary: every multi-byte character is cut.
  VocabBuilder b("gpt2", "qwen2");
  b.byte_alphabet();
  auto t = b.build_ok();
  ASSERT_TRUE(t);
  const std::string text = "\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x8E\x89!";
  const auto tokens = t->encode(text, false, false);
  EXPECT_EQ(tokens.size(), text.size());
  EXPECT_EQ(stream(*t, tokens), text);
}

// With real vocabularies: emoji and CJK that the vocabularies split into byte tokens (SPM) or
// byte-level pieces (BPE).
TEST(Streaming, RealVocabulariesNeverEmitPartialUtf8) {
  CADENZA_REQUIRE_SHARED();
  const std::string text =
      "Hello, world! \xF0\x9F\x8E\x89 na\xC3\xAFve caf\xC3\xA9 \xE2\x80\x94 "
      "\xE5\xA4\xA7\xE6\xA8\xA1\xE5\x9E\x8B\xE9\x83\xA8\xE7\xBD\xB2 \xF0\x9F\xA6\x99\xF0\x9F\x98\xB6"
      "\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F \xE1\x9E\x80\xE1\x9E\xB6\xE1\x9E\x93\xE1\x9F\x8B";
  for (const char* name : {"llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2", "falcon"}) {
    const auto path = test::shared_dir() / "tokenizer" / (std::string("ggml-vocab-") + name + ".gguf");
    auto f = gguf::GgufFile::open(path.string());
    ASSERT_TRUE(f.ok()) << (f ? "" : f.error());
    auto t = Tokenizer::from_gguf(**f);
    ASSERT_TRUE(t.ok()) << (t ? "" : t.error());
    const auto tokens = (*t)->encode(text, false, false);
    // Some character must actually be split for the test to mean anything.
    bool split = false;
    for (int32_t id : tokens) split |= !valid_utf8((*t)->token_piece(id));
    EXPECT_TRUE(split) << name;
    EXPECT_EQ(stream(**t, tokens), (*t)->decode(tokens)) << name;
    EXPECT_EQ((*t)->decode(tokens), text) << name;
  }
}

}  // namespace
}  // namespace cadenza
