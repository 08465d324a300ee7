// Parser: tokens to the statement tree, following jinja2/parser.py (operator precedence, tuple and
// slice syntax, `is` tests, filters, statement tags). Only tags a self-contained template can use
// exist: for, if, set, macro, call, filter, with, block, raw, break/continue (the loopcontrols
// extension) and generation (Hugging Face's tag); include/import/extends are syntax errors.
#pragma once

#include <vector>

#include "template/ast.h"
#include "template/lexer.h"
#include "util/result.h"

namespace cadenza::tmpl {

// Expressions deeper than this, or blocks nested deeper than kMaxBlockNesting, are syntax errors:
// real templates stay far below, and the bound keeps every tree walk's recursion small.
inline constexpr uint32_t kMaxExprDepth = 128;
inline constexpr uint32_t kMaxBlockNesting = 64;

// Errors: "TemplateSyntaxError at LINE:COL: message".
Result<Body> parse(const std::vector<Token>& tokens);

}  // namespace cadenza::tmpl
