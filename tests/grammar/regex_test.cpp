// regex_to_gbnf: grammars compiled with the grammar core accept exactly what std::regex
// (ECMAScript) full-matches, checked exhaustively over short strings of a small alphabet; UTF-8,
// JSON-string-body output, and the errors with their offsets.
#include "grammar/regex_to_gbnf.h"

#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_index.h"

namespace cadenza {
namespace {

std::shared_ptr<const grammar::TokenIndex> byte_index() {
  static const auto index = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
    return grammar::TokenIndex::build(std::move(bytes), {}, {}, {});
  }();
  return index;
}

struct Checker {
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  explicit Checker(const std::string& gbnf) {
    auto g = grammar::compile_gbnf(gbnf, byte_index());
    EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error()) << "\n" << gbnf;
    if (g) grammar = *g;
  }
  bool accepts(std::string_view text) const {
    grammar::GrammarMatcher m(grammar);
    return m.accept_bytes(text) && m.can_end();
  }
};

std::string gbnf_or_fail(std::string_view re) {
  auto g = regex_to_gbnf(re);
  EXPECT_TRUE(g.ok()) << re << ": " << (g.ok() ? "" : g.error());
  return g.ok() ? *g : "root ::= \"\\x00\"\n";
}

// Every string of length <= max_len over `alphabet`.
std::vector<std::string> all_strings(const std::string& alphabet, size_t max_len) {
  std::vector<std::string> out = {""};
  size_t from = 0;
  for (size_t len = 1; len <= max_len; ++len) {
    const size_t to = out.size();
    for (size_t i = from; i < to; ++i)
      for (const char c : alphabet) out.push_back(out[i] + c);
    from = to;
  }
  return out;
}

TEST(RegexToGbnf, AgreesWithStdRegexOnAllShortStrings) {
  const std::string alphabet = "ab1_-. \n\"\\";
  const auto inputs = all_strings(alphabet, 4);
  const char* regexes[] = {
      "a",          "ab|ba",        "a*",        "a+b?",       "(ab)+",      "(?:a|b){2}",
      "a{1,3}",     "a{2,}",        "[ab]*1",    "[^a]+",      "[a-c1]{0,2}", ".*",
      "\\d+",       "\\w*",         "\\s",       "\\D\\W",     "\\S+",       "[\\d_]+",
      "^a.b$",      "a\\.b",        "[-a]+",     "[a-]",       "\\\\+",      "\"[^\"]*\"",
      "(a|)b",      "(a|b|)*1",     "a{0}b",     "(a(b)?)+",   "[.]",        "a*?b",
      "[^\\n]*",    "(?:)a",        "a|b|1|_",   "[\\-_]",     "a{1}b{1,}",  "(?:ab|a)(?:b|)",
  };
  for (const char* re : regexes) {
    SCOPED_TRACE(re);
    const std::string gbnf = gbnf_or_fail(re);
    const Checker check(gbnf);
    if (!check.grammar) continue;
    const std::regex oracle(re, std::regex::ECMAScript);
    size_t mismatches = 0;
    for (const auto& s : inputs) {
      const bool want = std::regex_match(s, oracle);
      if (check.accepts(s) != want && ++mismatches <= 3)
        ADD_FAILURE() << "'" << s << "': regex " << want << ", grammar " << !want << "\n" << gbnf;
    }
  }
}

TEST(RegexToGbnf, RandomRegexesAgreeWithStdRegex) {
  // Random regexes over a small syntax; those both sides accept are compared on every string up
  // to length 3 (std::regex's ECMAScript grammar is the oracle).
  std::mt19937 rng(17);
  const std::string syntax = "ab1()[]|*+?.{}^-,2\\d";
  const auto inputs = all_strings("ab1-", 3);
  int compared = 0;
  for (int i = 0; i < 3000 && compared < 400; ++i) {
    std::string re;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < n; ++k) re += syntax[rng() % syntax.size()];
    std::regex oracle;
    try {
      oracle = std::regex(re, std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      continue;
    }
    auto g = regex_to_gbnf(re);
    if (!g) continue;
    SCOPED_TRACE(re);
    const Checker check(*g);
    if (!check.grammar) continue;
    ++compared;
    for (const auto& s : inputs) {
      const bool want = std::regex_match(s, oracle);
      if (check.accepts(s) != want) {
        ADD_FAILURE() << "'" << s << "': regex " << want << ", grammar " << !want << "\n" << *g;
        break;
      }
    }
  }
  EXPECT_GE(compared, 200);
}

TEST(RegexToGbnf, UnicodeEscapesAndOptions) {
  struct Case {
    const char* re;
    std::vector<std::string> yes, no;
  };
  const Case cases[] = {
      {"日本+", {"日本", "日本本"}, {"日", "日本日"}},
      {"[à-ÿ]{2}", {"àÿ", "éé"}, {"a", "àa", "à"}},
      {"[^é]", {"e", "日", "😀"}, {"é", ""}},
      {"\\u00e9\\x41\\u{1F600}", {"éA😀"}, {"éA"}},
      {".", {"a", "é", "😀"}, {"\n", "\r", "ab"}},
      {"\\t\\n\\r\\f\\v\\0", {std::string("\t\n\r\f\v\0", 6)}, {"tnrfv0"}},
      {"\\cJ", {"\n"}, {"J"}},
      {"[\\b]", {"\b"}, {"b"}},
      {"(?<year>\\d{4})-(?P<m>\\d\\d)", {"2024-01"}, {"2024-1"}},
      {"a{,2}", {"a{,2}"}, {"a", "aa"}},  // not a quantifier: literal
      {"x{", {"x{"}, {"x"}},
      {"[\\d-z]", {"1", "-", "z"}, {"y"}},  // as in JavaScript: \d, '-', 'z'
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.re);
    const Checker check(gbnf_or_fail(c.re));
    if (!check.grammar) continue;
    for (const auto& s : c.yes) EXPECT_TRUE(check.accepts(s)) << s;
    for (const auto& s : c.no) EXPECT_FALSE(check.accepts(s)) << s;
  }
  RegexGrammarOptions opt;
  opt.rule_prefix = "p-";
  opt.root_name = "re";
  auto g = regex_to_gbnf("ab", opt);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, "p-re ::= \"ab\"\n");
  opt.root_name = "bad name";
  EXPECT_FALSE(regex_to_gbnf("ab", opt).ok());
}

TEST(RegexToGbnf, JsonStringBodyEscapesWhatJsonMust) {
  // The expression matches the regex's strings as written between the quotes of a JSON string.
  auto e = regex_to_gbnf_expression("a\"b\\\\[\\n\\t\\x01c]", RegexTarget::kJsonStringBody);
  ASSERT_TRUE(e.ok()) << e.error();
  const Checker check("root ::= " + e->expr + "\n");
  ASSERT_TRUE(check.grammar);
  EXPECT_TRUE(check.accepts("a\\\"b\\\\c"));
  EXPECT_TRUE(check.accepts("a\\\"b\\\\\\n"));
  EXPECT_TRUE(check.accepts("a\\\"b\\\\\\u000a"));
  EXPECT_TRUE(check.accepts("a\\\"b\\\\\\t"));
  EXPECT_TRUE(check.accepts("a\\\"b\\\\\\u0001"));
  EXPECT_FALSE(check.accepts("a\"b\\c"));        // raw quote and backslash
  EXPECT_FALSE(check.accepts("a\\\"b\\\\\n"));     // raw newline
  EXPECT_FALSE(check.accepts("a\\\"b\\\\\\u0002"));
  auto anchors = regex_to_gbnf_expression("^x$", RegexTarget::kText);
  ASSERT_TRUE(anchors.ok());
  EXPECT_TRUE(anchors->anchored_start);
  EXPECT_TRUE(anchors->anchored_end);
  auto loose = regex_to_gbnf_expression("x\\$", RegexTarget::kText);
  ASSERT_TRUE(loose.ok());
  EXPECT_FALSE(loose->anchored_start);
  EXPECT_FALSE(loose->anchored_end);
}

TEST(RegexToGbnf, ErrorsCarryTheOffset) {
  const std::pair<const char*, const char*> cases[] = {
      {"(a)\\1", "offset 3: backreferences are not supported"},
      {"(?<n>a)\\k<n>", "offset 7: backreferences are not supported"},
      {"a(?=b)", "offset 1: lookaround assertions are not supported"},
      {"a(?!b)", "offset 1: lookaround"},
      {"(?<=a)b", "offset 0: lookaround"},
      {"(?<!a)b", "offset 0: lookaround"},
      {"(?i)abc", "offset 0: inline flags"},
      {"(?>a)", "offset 0: atomic groups"},
      {"a*+", "offset 2: possessive quantifiers"},
      {"a**", "offset 2: nothing to repeat"},
      {"*a", "offset 0: nothing to repeat"},
      {"a|?", "offset 2: nothing to repeat"},
      {"\\bword", "offset 0: word-boundary"},
      {"\\p{L}", "offset 0: Unicode property escapes"},
      {"a^b", "offset 1: anchor '^' is supported only at the very start"},
      {"a$b", "offset 1: anchor '$'"},
      {"(ab", "offset 0: unbalanced '('"},
      {"ab)", "offset 2: unbalanced ')'"},
      {"[ab", "offset 0: unterminated class"},
      {"[z-a]", "offset 1: range out of order"},
      {"a{3,1}", "offset 1: repetition range out of order"},
      {"a{20000}", "offset 1: repetition count above 10000"},
      {"\\q", "offset 0: unknown escape \\q"},
      {"\\x4", "offset 0: \\x needs two hex digits"},
      {"ab\\", "offset 2: trailing backslash"},
      {"[a-\\d]", "offset 1: a class escape cannot end a range"},
      {"\xff", "offset 0: invalid UTF-8"},
      {"", "the regex matches only the empty string"},
      {"^$", "the regex matches only the empty string"},
  };
  for (const auto& [re, msg] : cases) {
    SCOPED_TRACE(re);
    auto g = regex_to_gbnf(re);
    ASSERT_FALSE(g.ok()) << *g;
    EXPECT_EQ(g.error().rfind(msg, 0), 0u) << g.error();
  }
}

}  // namespace
}  // namespace cadenza
