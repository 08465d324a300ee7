// GrammarMatcher on the synthetic vocabulary: which strings a grammar accepts, token terminals,
// end of generation, rollback, forks, and the live-stack bound.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "grammar_test_util.h"

namespace cadenza::grammar {
namespace {

using test::synthetic_index;

// Whether `text` is a complete sentence of the grammar (accept_bytes, then can_end).
bool full_match(const std::string& gbnf, const std::string& text) {
  auto g = test::compile_or_die(gbnf, synthetic_index());
  if (!g) return false;
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.can_end();
}

// Whether `text` is a prefix of some sentence.
bool prefix_match(const std::string& gbnf, const std::string& text) {
  auto g = test::compile_or_die(gbnf, synthetic_index());
  if (!g) return false;
  GrammarMatcher m(g);
  return m.accept_bytes(text);
}

TEST(GrammarMatcher, LiteralsAndAlternatives) {
  const std::string g = "root ::= \"ab\" | \"cd\" tail\ntail ::= \"!\" | \"\"";
  EXPECT_TRUE(full_match(g, "ab"));
  EXPECT_TRUE(full_match(g, "cd"));
  EXPECT_TRUE(full_match(g, "cd!"));
  EXPECT_FALSE(full_match(g, "a"));
  EXPECT_TRUE(prefix_match(g, "a"));
  EXPECT_FALSE(prefix_match(g, "ac"));
  EXPECT_FALSE(full_match(g, "ab!"));
  EXPECT_FALSE(full_match(g, "cd!!"));
}

TEST(GrammarMatcher, Escapes) {
  EXPECT_TRUE(full_match(R"(root ::= "\n\r\t\\\"\x41\u00e9\U0001F600")",
                         "\n\r\t\\\"A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_TRUE(full_match("root ::= \"日本\"", "日本"));
}

TEST(GrammarMatcher, CharacterClasses) {
  const std::string ident = "root ::= [a-zA-Z_] [a-zA-Z0-9_]*";
  EXPECT_TRUE(full_match(ident, "_x9"));
  EXPECT_FALSE(full_match(ident, "9x"));
  const std::string notq = R"(root ::= "\"" [^"\\]* "\"")";
  EXPECT_TRUE(full_match(notq, "\"h\xC3\xA9llo \xE6\x97\xA5 \xF0\x9F\x98\x80\""));
  EXPECT_FALSE(full_match(notq, "\"a\"b\""));
  EXPECT_FALSE(full_match(notq, "\"a\\\""));
  // Negated classes exclude invalid UTF-8: a lone continuation byte, an overlong, a surrogate.
  EXPECT_FALSE(prefix_match(notq, "\"\x80"));
  EXPECT_FALSE(prefix_match(notq, "\"\xC0\xAF"));
  EXPECT_FALSE(prefix_match(notq, "\"\xED\xA0\x80"));
  EXPECT_TRUE(prefix_match(notq, "\"\xE6\x97"));  // a split code point is a valid prefix
  // Non-ASCII ranges.
  const std::string greek = "root ::= [α-ω]+";
  EXPECT_TRUE(full_match(greek, "αβω"));
  EXPECT_FALSE(full_match(greek, "αA"));
  EXPECT_FALSE(full_match(greek, "Ω"));
  // Any code point.
  EXPECT_TRUE(full_match("root ::= . . .", "a\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_FALSE(full_match("root ::= . .", "a"));
  EXPECT_TRUE(full_match("root ::= [\\x00-\\x7F\\u0080-\\U0010FFFF]", "\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(prefix_match("root ::= .", "\xF4\x90"));  // above U+10FFFF
}

TEST(GrammarMatcher, RepetitionBounds) {
  const std::string g = "root ::= \"a\"{2,4} \"b\"?";
  EXPECT_FALSE(full_match(g, "a"));
  EXPECT_TRUE(full_match(g, "aa"));
  EXPECT_TRUE(full_match(g, "aaab"));
  EXPECT_TRUE(full_match(g, "aaaa"));
  EXPECT_FALSE(full_match(g, "aaaaa"));
  EXPECT_FALSE(full_match(g, "aabb"));
  EXPECT_TRUE(full_match("root ::= \"ab\"{3}", "ababab"));
  EXPECT_FALSE(full_match("root ::= \"ab\"{3}", "abab"));
  EXPECT_TRUE(full_match("root ::= \"x\"{2,}", "xxxxxxx"));
  EXPECT_FALSE(full_match("root ::= \"x\"{2,}", "x"));
  EXPECT_TRUE(full_match("root ::= (\"a\" | \"b\")+ \"c\"", "abbac"));
  EXPECT_FALSE(full_match("root ::= (\"a\" | \"b\")+ \"c\"", "c"));
  EXPECT_TRUE(full_match("root ::= (\"a\"?)* \"b\"", "aab"));
  EXPECT_TRUE(full_match("root ::= \"a\"{0}", ""));
}

TEST(GrammarMatcher, JsonSentences) {
  const std::string g = test::json_gbnf();
  EXPECT_TRUE(full_match(g, R"({"a": [1, -2.5e3, true, null, "x\u00e9\n"], "b": {}})"));
  EXPECT_TRUE(full_match(g, " [ ] "));
  EXPECT_FALSE(full_match(g, "{\"a\" 1}"));
  EXPECT_FALSE(full_match(g, "[01]"));
  EXPECT_FALSE(full_match(g, "{\"a\": 1"));
  EXPECT_TRUE(prefix_match(g, "{\"a\": 1"));
}

// The id of the "ab" piece in the synthetic vocabulary.
int32_t kFirstPieceAb() {
  const auto& p = test::synthetic_pieces();
  return test::kFirstPiece + static_cast<int32_t>(std::find(p.begin(), p.end(), "ab") - p.begin());
}

TEST(GrammarMatcher, TokensAndEndOfGeneration) {
  auto index = synthetic_index();
  const int32_t tool = test::synthetic_special_base(), eot = tool + 1, other = tool + 2;
  auto g = test::compile_or_die("root ::= \"ab\" <|tool|> \"c\"*", index);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.accept_token(eot));  // cannot end yet
  EXPECT_TRUE(m.accept_token(kFirstPieceAb()));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept_token('c'));
  EXPECT_FALSE(m.accept_token(other));
  EXPECT_TRUE(m.accept_token(tool));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.is_terminated());
  EXPECT_TRUE(m.accept_token('c'));
  EXPECT_TRUE(m.accept_token(eot));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_token('c'));
  std::vector<uint32_t> words(m.mask_words());
  m.fill_next_token_bitmask(words);
  EXPECT_TRUE(test::allowed_ids(words, index->n_vocab()).empty());
}

TEST(GrammarMatcher, TokenIdTerminalsAndNegation) {
  auto index = synthetic_index();
  const int32_t tool = test::synthetic_special_base(), eot = tool + 1;
  auto g = test::compile_or_die("root ::= <[97]> !<[98]> \"z\"", index);
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept_token('a'));
  GrammarMatcher fork = m;
  EXPECT_FALSE(m.accept_token('b'));
  EXPECT_FALSE(m.accept_token(eot));  // negation never admits an eog id
  EXPECT_TRUE(m.accept_token(tool));
  EXPECT_TRUE(m.accept_token('z'));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(fork.accept_token('q'));
  EXPECT_TRUE(fork.accept_bytes("z"));
  // A terminal matches the token only, not its bytes typed out.
  GrammarMatcher t(test::compile_or_die("root ::= <[97]>", index));
  EXPECT_FALSE(t.accept_bytes("a"));
}

TEST(GrammarMatcher, RollbackRestoresStates) {
  auto g = test::compile_or_die(test::json_gbnf(), synthetic_index());
  GrammarMatcher m(g);
  const std::string start = m.state_key();
  ASSERT_TRUE(m.accept_bytes("{"));
  const std::string after_brace = m.state_key();
  ASSERT_TRUE(m.accept_token('"'));
  ASSERT_TRUE(m.accept_token('k'));
  EXPECT_EQ(m.rollback_depth(), 3);
  m.rollback(2);
  EXPECT_EQ(m.state_key(), after_brace);
  m.rollback(1);
  EXPECT_EQ(m.state_key(), start);
  EXPECT_EQ(m.rollback_depth(), 0);
  // Rolling back past an eog un-terminates.
  GrammarMatcher e(test::compile_or_die("root ::= \"a\"", synthetic_index()));
  ASSERT_TRUE(e.accept_token('a'));
  ASSERT_TRUE(e.accept_token(test::synthetic_special_base() + 1));
  EXPECT_TRUE(e.is_terminated());
  e.rollback(1);
  EXPECT_TRUE(e.can_end());
  EXPECT_EQ(e.rollback_depth(), 1);
  // The history is bounded.
  GrammarMatcher r(test::compile_or_die("root ::= \"a\"*", synthetic_index()));
  for (int k = 0; k < 100; ++k) ASSERT_TRUE(r.accept_token('a'));
  EXPECT_EQ(r.rollback_depth(), GrammarMatcher::kMaxRollback);
  r.reset();
  EXPECT_EQ(r.rollback_depth(), 0);
}

TEST(GrammarMatcher, ForksAreIndependent) {
  auto g = test::compile_or_die(test::json_gbnf(), synthetic_index());
  GrammarMatcher a(g);
  ASSERT_TRUE(a.accept_bytes("[1"));
  GrammarMatcher b = a;
  ASSERT_TRUE(a.accept_bytes(", 2]"));
  ASSERT_TRUE(b.accept_bytes("]"));
  EXPECT_TRUE(a.can_end());
  EXPECT_TRUE(b.can_end());
  EXPECT_FALSE(b.accept_bytes(","));
  GrammarMatcher c = b;
  c.reset();
  EXPECT_TRUE(c.accept_bytes("{}"));
  EXPECT_TRUE(b.can_end());
}

TEST(GrammarMatcher, FailedAcceptLeavesStateUnchanged) {
  auto g = test::compile_or_die(test::json_gbnf(), synthetic_index());
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept_bytes("[tr"));
  const std::string key = m.state_key();
  EXPECT_FALSE(m.accept_bytes("uex"));
  EXPECT_FALSE(m.accept_token('x'));
  EXPECT_EQ(m.state_key(), key);
  EXPECT_EQ(m.rollback_depth(), 1);
}

TEST(GrammarMatcher, TooManyStacksIsRejectionNotBlowUp) {
  // Every 'a' may start or continue one of two alternatives at each level: the ambiguity grows
  // the stack set until the cap turns the byte down.
  auto g = test::compile_or_die("root ::= x*\nx ::= \"a\" | \"a\" \"a\" | \"a\" y\ny ::= x \"b\"", synthetic_index());
  GrammarMatcher m(g);
  int accepted = 0;
  while (accepted < 10000 && m.accept_bytes("a")) ++accepted;
  EXPECT_LT(accepted, 10000);
  EXPECT_LE(m.num_stacks(), GrammarMatcher::kMaxStacks);
}

}  // namespace
}  // namespace cadenza::grammar

namespace cadenza::grammar {
namespace {

TEST(GrammarMatcherQwen2, SpecialTokensAndRealTokenization) {
  CADENZA_REQUIRE_SHARED();
  auto index = test::qwen2_index();
  if (!index) GTEST_SKIP() << "SKIPPED: ../shared/models/tiny-qwen2-f16.gguf not loadable";
  const auto im_start = index->find_by_text("<|im_start|>");
  const auto im_end = index->find_by_text("<|im_end|>");
  ASSERT_TRUE(im_start && im_end);
  EXPECT_TRUE(index->is_special(*im_start));
  EXPECT_TRUE(index->is_eog(*im_end));
  auto g = test::compile_or_die("root ::= <|im_start|> \"héllo, 世界\" <|im_end|> \"!\"?", index);
  ASSERT_TRUE(g);
  GrammarMatcher m(g);
  std::vector<uint32_t> words(m.mask_words());
  m.fill_next_token_bitmask(words);
  EXPECT_EQ(test::allowed_ids(words, index->n_vocab()), std::vector<int32_t>{*im_start});
  ASSERT_TRUE(m.accept_token(*im_start));
  // The text typed as special-token text is not the token.
  EXPECT_FALSE(GrammarMatcher(g).accept_bytes("<|im_start|>"));
  ASSERT_TRUE(m.accept_bytes("héllo, 世"));
  m.fill_next_token_bitmask(words);
  // A token holding the last character's first bytes only (a split code point) is allowed.
  std::string jie = "界";
  bool split_seen = false;
  for (int32_t id : test::allowed_ids(words, index->n_vocab())) {
    const auto b = index->token_bytes(id);
    EXPECT_EQ(jie.compare(0, b.size(), b), 0) << id;
    split_seen |= b.size() < jie.size();
  }
  EXPECT_TRUE(split_seen);
  ASSERT_TRUE(m.accept_bytes(jie));
  EXPECT_FALSE(m.can_end());
  m.fill_next_token_bitmask(words);
  EXPECT_EQ(test::allowed_ids(words, index->n_vocab()), std::vector<int32_t>{*im_end});
  ASSERT_TRUE(m.accept_token(*im_end));  // by the token terminal: not the end of generation
  EXPECT_FALSE(m.is_terminated());
  EXPECT_TRUE(m.can_end());
}

}  // namespace
}  // namespace cadenza::grammar

namespace cadenza::grammar {
namespace {

TEST(GrammarMatcher, LargeEnumsWork) {
  std::string gbnf = "root ::= \"x\"";
  for (int k = 0; k < 3000; ++k) gbnf += fmt::format(" | \"v{}\"", k);
  auto g = test::compile_or_die(gbnf, test::synthetic_index());
  ASSERT_TRUE(g);
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept_bytes("v2999"));
  EXPECT_TRUE(m.can_end());
  std::string too_many = "root ::= x\nx ::= \"a\"";
  for (int k = 0; k < 5000; ++k) too_many += fmt::format(" | \"a{}\"", k);
  auto t = compile_gbnf(too_many, test::synthetic_index());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error(), "1:1: the grammar is too ambiguous: 5001 parse stacks at its start (limit 4096)");
}

}  // namespace
}  // namespace cadenza::grammar
