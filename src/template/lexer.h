// Lexer: template source to tokens, with Jinja2's whitespace handling as Hugging Face configures
// it (trim_blocks and lstrip_blocks on, keep_trailing_newline off) applied here, so the parser
// only sees the text that will be output.
//
// Rules, as in jinja2/lexer.py:
//   - "\r\n" and "\r" become "\n"; one trailing newline of the template is dropped.
//   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag; `-%}`, `-}}`, `-#}` all after it.
//   - trim_blocks: one "\n" directly after `%}` or `#}` is dropped (not after `+%}`).
//   - lstrip_blocks: spaces and tabs from the start of a line up to `{%` or `{#` are dropped
//     (not before `{%+`, never before `{{`).
//   - `{% raw %}...{% endraw %}` is text; comments are dropped.
//   - inside a tag, `}}` and `%}` only end it when brackets are balanced.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace cadenza::tmpl {

enum class TokenKind : uint8_t {
  kText,        // literal template text (after whitespace control)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifiers and keywords (and, or, not, in, is, if, ... are names here)
  kString,      // text holds the decoded value
  kInt,
  kFloat,
  kOp,          // text holds the operator: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { } ;
  kEof,
};

struct Token {
  TokenKind kind = TokenKind::kEof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  uint32_t line = 1;
  uint32_t col = 1;
};

// Splits `source` into tokens ending with kEof. Errors ("TemplateSyntaxError at L:C: ...") for
// unterminated tags, comments, raw blocks and strings, bad escapes, unbalanced brackets and
// characters that start no token.
Result<std::vector<Token>> lex(std::string_view source);

}  // namespace cadenza::tmpl
