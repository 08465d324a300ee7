// Expression parser: the token cursor and Jinja2's expression grammar (jinja2/parser.py):
//
//   condexpr := or ("if" or ("else" condexpr)?)*      tuple := expr ("," expr)* [","]
//   or := and ("or" and)*     and := not ("and" not)*     not := "not" not | compare
//   compare := math1 ((== != < <= > >= in "not in") math1)*
//   math1 := concat ((+ -) concat)*     concat := math2 ("~" math2)*
//   math2 := pow ((* / // %) pow)*      pow := unary ("**" unary)*   (left-associative)
//   unary := (- +) unary | primary postfix* (filter | test | call)*
//
// so filters bind tighter than every binary operator (`a + b|trim` trims b), and unary minus
// binds tighter than `**` (-2**2 == 4). The statement parser (parser.cpp) derives from it.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "template/ast.h"
#include "template/lexer.h"
#include "template/parser.h"
#include "util/result.h"

namespace cadenza::tmpl {

using Tags = std::initializer_list<std::string_view>;

class ExprParser {
 public:
  explicit ExprParser(const std::vector<Token>& tokens) : toks_(tokens) {}

 protected:
  // ---- token access ----
  const Token& cur() const { return toks_[i_]; }
  const Token& look(size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  void next() { if (i_ + 1 < toks_.size()) ++i_; }
  static Pos pos_of(const Token& t) { return Pos{t.line, t.col}; }
  bool is_op(std::string_view op) const { return cur().kind == TokenKind::kOp && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().kind == TokenKind::kName && cur().text == n; }
  bool skip_op(std::string_view op) { if (!is_op(op)) return false; next(); return true; }
  bool skip_name(std::string_view n) { if (!is_name(n)) return false; next(); return true; }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kText: return "template data";
      case TokenKind::kVarBegin: return "begin of print statement";
      case TokenKind::kVarEnd: return "end of print statement";
      case TokenKind::kBlockBegin: return "begin of statement block";
      case TokenKind::kBlockEnd: return "end of statement block";
      case TokenKind::kEof: return "end of template";
      case TokenKind::kString: return "string";
      case TokenKind::kInt: return "integer";
      case TokenKind::kFloat: return "float";
      default: return "'" + t.text + "'";
    }
  }

  Error fail(const Token& t, std::string_view msg) const {
    return make_error("TemplateSyntaxError at {}:{}: {}", t.line, t.col, msg);
  }
  Status expect_op(std::string_view op) {
    if (!skip_op(op)) return fail(cur(), fmt::format("expected '{}', got {}", op, describe(cur())));
    return {};
  }
  Status expect_kind(TokenKind k, std::string_view what) {
    if (cur().kind != k) return fail(cur(), fmt::format("expected {}, got {}", what, describe(cur())));
    next();
    return {};
  }
  Result<std::string> expect_name() {
    if (cur().kind != TokenKind::kName) return fail(cur(), fmt::format("expected name, got {}", describe(cur())));
    std::string n = cur().text;
    next();
    return n;
  }

  Result<ExprPtr> finish(ExprPtr e);

  // ---- grammar (one method per rule) ----
  bool is_tuple_end(Tags extra_end) const;
  Result<ExprPtr> parse_expression(bool with_condexpr);
  Result<ExprPtr> parse_tuple(bool simplified, bool with_condexpr, Tags extra_end, bool explicit_parens);
  Result<ExprPtr> parse_condexpr();
  Result<ExprPtr> parse_or();
  Result<ExprPtr> parse_and();
  Result<ExprPtr> parse_not();
  Result<ExprPtr> parse_compare();
  Result<ExprPtr> binary(Pos p, BinaryOp op, ExprPtr l, ExprPtr r);
  Result<ExprPtr> parse_math1();
  Result<ExprPtr> parse_concat();
  Result<ExprPtr> parse_math2();
  Result<ExprPtr> parse_pow();
  Result<ExprPtr> parse_unary(bool with_filter);
  Result<ExprPtr> parse_primary();
  Result<ExprPtr> parse_list();
  Result<ExprPtr> parse_dict();
  Result<ExprPtr> parse_postfix(ExprPtr node);
  Result<ExprPtr> parse_filter_expr(ExprPtr node);
  Result<ExprPtr> parse_subscript(ExprPtr node);
  Result<ExprPtr> parse_subscribed(ExprPtr& node, Pos p);
  Result<ArgList> parse_call_args();
  Result<ExprPtr> parse_call(ExprPtr callee);
  Result<ExprPtr> parse_filter(ExprPtr node, bool start_inline);
  Result<ExprPtr> parse_test(ExprPtr node);

  const std::vector<Token>& toks_;  // ends with kEof
  size_t i_ = 0;
  uint32_t nesting_ = 0;  // expression recursion, bounded by kMaxExprDepth
  // Macros being parsed: a `varargs`/`kwargs`/`caller` reference inside marks them.
  std::vector<MacroStmt*> macro_stack_;
};

}  // namespace cadenza::tmpl
