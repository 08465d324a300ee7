// Regular expressions to GBNF: for `guided_regex` requests (regex_to_gbnf, a whole grammar whose
// one rule accepts exactly the strings the regex matches in full) and for the `pattern` keyword of
// JSON Schema (regex_to_gbnf_expression with RegexTarget::kJsonStringBody, used by
// json_schema_to_gbnf.h: the expression then matches the JSON-escaped text of the string's body).
//
// Supported, a practical ECMAScript / PCRE subset over Unicode code points (the regex is UTF-8):
//   literals; escapes \n \r \t \v \f \0 \xHH \uHHHH \u{H...} \cX and escaped punctuation (\. \* ...);
//   . (any code point but \n \r U+2028 U+2029, as in JavaScript); classes [a-z] [^...] with
//   ranges, [^] (any); \d \w \s \D \W \S (ASCII \d \w, JavaScript's \s) in and out of classes;
//   groups (...), (?:...), (?<name>...), (?P<name>...); alternation |; quantifiers * + ? {m}
//   {m,} {m,n} (a lazy ? after them is accepted: full-match languages are the same); ^ only at
//   the very start and $ only at the very end. A '{' that does not start a quantifier is literal.
// Errors (with the byte offset into the regex, "offset 5: ..."): backreferences (\1, \k<n>),
// lookahead / lookbehind, atomic groups, inline flags ((?i)...), possessive quantifiers, \b \B,
// \p{...}, anchors anywhere but the ends, unknown escapes, unbalanced parentheses or brackets,
// empty classes, ranges out of order, repetition counts above max_repetition, invalid UTF-8.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "util/result.h"

namespace cadenza {

struct RegexGrammarOptions {
  std::string rule_prefix;        // the one rule is named rule_prefix + root_name
  std::string root_name = "root";
  int max_repetition = 10000;     // the largest m or n allowed in {m,n}
};

// A grammar (one rule) matching exactly the strings the regex matches in full (^ and $ at the ends
// change nothing). Errors: see above; also an empty language or a regex that matches only "".
Result<std::string> regex_to_gbnf(std::string_view regex, const RegexGrammarOptions& opt = {});

enum class RegexTarget {
  kText,            // the expression matches the characters themselves (UTF-8)
  kJsonStringBody,  // it matches them as written inside a JSON string: " \ and U+0000..U+001F
                    // escaped (\" \\ \n ... or \u00XX), everything else as itself
};

// One GBNF expression (no rules of its own) for the regex. `expr` is empty when the regex matches
// only the empty string. anchored_start / anchored_end: whether it began with ^ / ended with $
// (a full-match caller ignores them; a search caller such as JSON Schema's pattern adds "any
// text" on the sides that are not anchored).
struct RegexExpression {
  std::string expr;
  bool anchored_start = false;
  bool anchored_end = false;
};
Result<RegexExpression> regex_to_gbnf_expression(std::string_view regex, RegexTarget target,
                                                 int max_repetition = 10000);

// The GBNF literal ("...") for the bytes: " and \ escaped, other ASCII controls as \xHH, \n \r \t
// as themselves, bytes >= 0x80 (UTF-8) unchanged. Shared with the JSON Schema converter.
std::string gbnf_literal(std::string_view bytes);

// True when `name` is a valid GBNF rule name or part of one: non-empty, only [a-zA-Z0-9-].
bool is_gbnf_rule_name(std::string_view name);

}  // namespace cadenza
