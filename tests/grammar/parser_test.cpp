// GBNF syntax: what parses, what each construct matches, and errors with line:column.
#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar_test_util.h"

namespace cadenza::grammar {
namespace {

std::string parse_error(const std::string& gbnf) {
  auto g = compile_gbnf(gbnf, test::synthetic_index());
  return g.ok() ? std::string("OK") : g.error();
}

TEST(GbnfParser, ParsesTheJsonGrammar) {
  auto g = parse_gbnf(test::json_gbnf());
  ASSERT_TRUE(g.ok()) << g.error();
  EXPECT_EQ(g->rules[g->root].name, "root");
  EXPECT_NE(g->to_string().find("object ::="), std::string::npos);
}

TEST(GbnfParser, AcceptsCommentsNewlinesAndContinuations) {
  EXPECT_EQ(parse_error("# c\nroot ::= a # trailing\n  | \"b\"\n\na ::=\n  \"x\" (\n \"y\"\n | \"z\" )\n"),
            "OK");
  EXPECT_EQ(parse_error("root::=\"a\"b\nb::=[b]"), "OK");
  EXPECT_EQ(parse_error("root ::= \"\""), "OK");
  EXPECT_EQ(parse_error("root ::= x-y_1\nx-y_1 ::= \"q\""), "OK");
}

TEST(GbnfParser, SyntaxErrorsCarryLineAndColumn) {
  EXPECT_EQ(parse_error("root ::= \"a"), "1:10: unterminated string literal");
  EXPECT_EQ(parse_error("root ::= \"a\"\nfoo ::= [a-"), "2:9: unterminated character class");
  EXPECT_EQ(parse_error("root ::= ( \"a\""), "1:15: expected ')' before the end of the grammar");
  EXPECT_EQ(parse_error("root ::= \"a\" )"), "1:14: expected a rule name, found ')'");
  EXPECT_EQ(parse_error("root = \"a\""), "1:6: expected '::=' after 'root'");
  EXPECT_EQ(parse_error("root ::= \"\\q\""), "1:11: unknown escape '\\q'");
  EXPECT_EQ(parse_error("root ::= \"\\x4\""), "1:11: \\x needs 2 hex digits");
  EXPECT_EQ(parse_error("root ::= \"\\uD800\""), "1:11: escape U+D800 is not a Unicode scalar value");
  EXPECT_EQ(parse_error("root ::= [z-a]"), "1:10: class range U+7A-U+61 is reversed");
  EXPECT_EQ(parse_error("root ::= \"a\"{3,2}"), "1:13: repetition {3,2} has max < min");
  EXPECT_EQ(parse_error("root ::= \"a\"{2"), "1:13: expected '}' to close the repetition");
  EXPECT_EQ(parse_error("root ::= @"), "1:10: unexpected character '@'");
  EXPECT_EQ(parse_error("root ::= <[12"), "1:10: expected a token id as <[123]>");
}

TEST(GbnfParser, RuleErrors) {
  EXPECT_EQ(parse_error(""), "1:1: empty grammar (no rules)");
  EXPECT_EQ(parse_error("  # only a comment\n"), "1:1: empty grammar (no rules)");
  EXPECT_EQ(parse_error("a ::= \"x\""), "1:1: the grammar has no rule named 'root'");
  EXPECT_EQ(parse_error("root ::= \"x\" b\n"), "1:14: undefined rule 'b'");
  EXPECT_EQ(parse_error("root ::= \"x\"\nroot ::= \"y\""), "2:1: rule 'root' is defined twice");
}

TEST(GbnfParser, TokenTerminalErrors) {
  EXPECT_EQ(parse_error("root ::= <[99999]>"),
            fmt::format("1:10: token id 99999 is outside the vocabulary of {} tokens",
                        test::synthetic_index()->n_vocab()));
  EXPECT_EQ(parse_error("root ::= \"a\" <|nope|>"), "1:14: no token has the text '<|nope|>'");
  EXPECT_EQ(parse_error("root ::= <|tool|> !<[3]> <[5]>"), "OK");
}

TEST(GbnfParser, LeftRecursionIsRejected) {
  EXPECT_EQ(parse_error("root ::= root \"a\" | \"b\""),
            "1:1: rule 'root' is left-recursive (it can reach 'root' before consuming any input); "
            "rewrite it with repetition, e.g. a ::= b (\"+\" b)*");
  // Through a nullable prefix and another rule.
  std::string e = parse_error("root ::= x\nx ::= e y\ny ::= x \"a\" | \"b\"\ne ::= \"\"?");
  EXPECT_NE(e.find("left-recursive"), std::string::npos) << e;
  // Right recursion, tail self-reference and repetition of a nullable item are fine.
  EXPECT_EQ(parse_error("root ::= \"a\" root | \"\""), "OK");
  EXPECT_EQ(parse_error("root ::= (\"a\"?)* \"b\""), "OK");
  EXPECT_EQ(parse_error("root ::= x\nx ::= \"\" x | \"c\""), "OK");
}

TEST(GbnfParser, LimitsAreErrorsAndFast) {
  const auto start = std::chrono::steady_clock::now();
  CompileLimits small;
  small.max_grammar_bytes = 100;
  EXPECT_NE(parse_gbnf(std::string(200, ' ') + "root ::= \"a\"", small).error().find("exceeds the limit of 100 bytes"),
            std::string::npos);
  // A repetition count past the element budget.
  auto big = parse_gbnf("root ::= \"a\"{100000000}");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().find("limit"), std::string::npos) << big.error();
  // A bounded repetition producing too many rules.
  auto rules = parse_gbnf("root ::= \"a\"{0,50000}");
  ASSERT_FALSE(rules.ok());
  EXPECT_NE(rules.error().find("limit of 10000 rules"), std::string::npos) << rules.error();
  // Deep nesting.
  std::string deep = "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')');
  auto d = parse_gbnf(deep);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().find("nested deeper than the limit of 256"), std::string::npos) << d.error();
  // Many rules.
  std::string many = "root ::= r0\n";
  for (int k = 0; k < 20000; ++k) many += fmt::format("r{} ::= \"a\" r{}\n", k, k + 1);
  many += "r20000 ::= \"b\"\n";
  auto m = parse_gbnf(many);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().find("limit of 10000 rules"), std::string::npos) << m.error();
  // A huge but legal grammar text over the byte limit.
  auto huge = parse_gbnf("root ::= \"" + std::string(2 << 20, 'a') + "\"");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().find("bytes exceeds the limit"), std::string::npos);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 2.0);
}

TEST(GbnfParser, TimeLimitIsAnError) {
  CompileLimits limits;
  limits.max_seconds = 0.0;
  std::string many = "root ::= r0\n";
  for (int k = 0; k < 5000; ++k) many += fmt::format("r{} ::= \"a\" r{}\n", k, k + 1);
  many += "r5000 ::= \"b\"\n";
  auto g = compile_gbnf(many, test::synthetic_index(), limits);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().find("exceeded 0 s"), std::string::npos) << g.error();
}

}  // namespace
}  // namespace cadenza::grammar
