// GBNF text -> Grammar IR (grammar.h). The syntax is the public GBNF that llama.cpp users write:
//
//   name ::= alternatives          rule (names [a-zA-Z0-9_-]+; the start rule is "root")
//   a b | c                         sequence, alternation; ( ... ) groups
//   "..."                           literal; escapes \n \r \t \\ \" \' \[ \] \xHH \uHHHH \UHHHHHHHH
//   [a-z0-9_]  [^"\\]  .            character classes over code points; . is any code point
//   x* x+ x? x{m} x{m,} x{m,n}       repetition
//   # ...                           comment to end of line
//   <[123]>  <|python_tag|>  !<[7]> token terminals: a token id, the token whose text is exactly
//                                   the spelling (resolved at compile time), any token but these
//
// \xHH, \u and \U denote code points (encoded as UTF-8), as in llama.cpp. Surrogates and values
// above U+10FFFF are errors in literals and are left out of classes.
//
// Errors carry "line:column: message": syntax errors, undefined or twice-defined rules, a missing
// root, an empty grammar, and exceeded CompileLimits. Left recursion is checked at compile time
// (compile_gbnf), not here.
//
// Thread-safety: a pure function.
#pragma once

#include <string_view>

#include "grammar/grammar.h"
#include "util/result.h"

namespace cadenza::grammar {

Result<Grammar> parse_gbnf(std::string_view text, const CompileLimits& limits = {});

}  // namespace cadenza::grammar
