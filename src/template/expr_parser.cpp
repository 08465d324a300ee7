#include "template/expr_parser.h"

#include <algorithm>

#include "template/try.h"

namespace cadenza::tmpl {
namespace {

uint32_t depth_of(const ExprPtr& e) { return e ? e->depth : 0; }
uint32_t depth_of(const ArgList& a) {
  uint32_t d = std::max(depth_of(a.star), depth_of(a.star_star));
  for (const auto& e : a.pos) d = std::max(d, e->depth);
  for (const auto& [k, e] : a.kw) d = std::max(d, e->depth);
  return d;
}

// Height of a node from its direct children (which already know theirs).
uint32_t compute_depth(const Expr& e) {
  uint32_t d = 0;
  switch (e.kind) {
    case ExprKind::kLiteral: case ExprKind::kName: break;
    case ExprKind::kList: case ExprKind::kTuple:
      for (const auto& i : static_cast<const SeqExpr&>(e).items) d = std::max(d, i->depth);
      break;
    case ExprKind::kDict:
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) d = std::max({d, k->depth, v->depth});
      break;
    case ExprKind::kAttr: d = depth_of(static_cast<const AttrExpr&>(e).obj); break;
    case ExprKind::kItem: {
      const auto& x = static_cast<const ItemExpr&>(e);
      d = std::max(depth_of(x.obj), depth_of(x.index));
      break;
    }
    case ExprKind::kSlice: {
      const auto& x = static_cast<const SliceExpr&>(e);
      d = std::max({depth_of(x.obj), depth_of(x.start), depth_of(x.stop), depth_of(x.step)});
      break;
    }
    case ExprKind::kCall: {
      const auto& x = static_cast<const CallExpr&>(e);
      d = std::max(depth_of(x.callee), depth_of(x.args));
      break;
    }
    case ExprKind::kFilter: {
      const auto& x = static_cast<const FilterExpr&>(e);
      d = std::max(depth_of(x.operand), depth_of(x.args));
      break;
    }
    case ExprKind::kTest: {
      const auto& x = static_cast<const TestExpr&>(e);
      d = std::max(depth_of(x.operand), depth_of(x.args));
      break;
    }
    case ExprKind::kUnary: d = depth_of(static_cast<const UnaryExpr&>(e).operand); break;
    case ExprKind::kBinary: {
      const auto& x = static_cast<const BinaryExpr&>(e);
      d = std::max(depth_of(x.left), depth_of(x.right));
      break;
    }
    case ExprKind::kCompare: {
      const auto& x = static_cast<const CompareExpr&>(e);
      d = depth_of(x.first);
      for (const auto& [op, r] : x.rest) d = std::max(d, r->depth);
      break;
    }
    case ExprKind::kCond: {
      const auto& x = static_cast<const CondExpr&>(e);
      d = std::max({depth_of(x.cond), depth_of(x.then), depth_of(x.otherwise)});
      break;
    }
  }
  return d + 1;
}

}  // namespace

// Every node passes through here: records its height and rejects over-deep trees.
Result<ExprPtr> ExprParser::finish(ExprPtr e) {
  e->depth = compute_depth(*e);
  if (e->depth > kMaxExprDepth)
    return make_error("TemplateSyntaxError at {}:{}: expression nested too deeply (limit {})", e->pos.line,
                      e->pos.col, kMaxExprDepth);
  return e;
}

bool ExprParser::is_tuple_end(Tags extra_end) const {
  if (cur().kind == TokenKind::kVarEnd || cur().kind == TokenKind::kBlockEnd || cur().kind == TokenKind::kEof) return true;
  if (is_op(")")) return true;
  if (cur().kind == TokenKind::kName)
    for (auto n : extra_end) if (cur().text == n) return true;
  return false;
}

Result<ExprPtr> ExprParser::parse_expression(bool with_condexpr) {
  if (++nesting_ > kMaxExprDepth) return fail(cur(), fmt::format("expression nested too deeply (limit {})", kMaxExprDepth));
  auto r = with_condexpr ? parse_condexpr() : parse_or();
  --nesting_;
  return r;
}

Result<ExprPtr> ExprParser::parse_tuple(bool simplified, bool with_condexpr, Tags extra_end, bool explicit_parens) {
  const Pos p = pos_of(cur());
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) TMPL_CHECK(expect_op(","));
    if (is_tuple_end(extra_end)) break;
    if (simplified) {
      TMPL_TRY(e, parse_primary());
      args.push_back(std::move(e));
    } else {
      TMPL_TRY(e, parse_expression(with_condexpr));
      args.push_back(std::move(e));
    }
    if (is_op(",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parens) return fail(cur(), fmt::format("expected an expression, got {}", describe(cur())));
  }
  auto t = std::make_unique<SeqExpr>(ExprKind::kTuple, p);
  t->items = std::move(args);
  return finish(std::move(t));
}

Result<ExprPtr> ExprParser::parse_condexpr() {
  const Pos p = pos_of(cur());
  TMPL_TRY(e1, parse_or());
  while (skip_name("if")) {
    TMPL_TRY(cond, parse_or());
    ExprPtr other;
    if (skip_name("else")) {
      TMPL_TRY(o, parse_expression(true));
      other = std::move(o);
    }
    TMPL_TRY(c, finish(std::make_unique<CondExpr>(p, std::move(cond), std::move(e1), std::move(other))));
    e1 = std::move(c);
  }
  return e1;
}

Result<ExprPtr> ExprParser::parse_or() {
  TMPL_TRY(left, parse_and());
  while (is_name("or")) {
    const Pos p = pos_of(cur());
    next();
    TMPL_TRY(right, parse_and());
    TMPL_TRY(b, finish(std::make_unique<BinaryExpr>(p, BinaryOp::kOr, std::move(left), std::move(right))));
    left = std::move(b);
  }
  return left;
}

Result<ExprPtr> ExprParser::parse_and() {
  TMPL_TRY(left, parse_not());
  while (is_name("and")) {
    const Pos p = pos_of(cur());
    next();
    TMPL_TRY(right, parse_not());
    TMPL_TRY(b, finish(std::make_unique<BinaryExpr>(p, BinaryOp::kAnd, std::move(left), std::move(right))));
    left = std::move(b);
  }
  return left;
}

Result<ExprPtr> ExprParser::parse_not() {
  if (is_name("not")) {
    const Pos p = pos_of(cur());
    next();
    if (++nesting_ > kMaxExprDepth) return fail(cur(), "expression nested too deeply");
    TMPL_TRY(operand, parse_not());
    --nesting_;
    return finish(std::make_unique<UnaryExpr>(p, UnaryOp::kNot, std::move(operand)));
  }
  return parse_compare();
}

Result<ExprPtr> ExprParser::parse_compare() {
  const Pos p = pos_of(cur());
  TMPL_TRY(first, parse_math1());
  std::unique_ptr<CompareExpr> cmp;
  while (true) {
    CompareOp op;
    if (is_op("==")) op = CompareOp::kEq;
    else if (is_op("!=")) op = CompareOp::kNe;
    else if (is_op("<")) op = CompareOp::kLt;
    else if (is_op("<=")) op = CompareOp::kLe;
    else if (is_op(">")) op = CompareOp::kGt;
    else if (is_op(">=")) op = CompareOp::kGe;
    else if (is_name("in")) op = CompareOp::kIn;
    else if (is_name("not") && look().kind == TokenKind::kName && look().text == "in") { op = CompareOp::kNotIn; next(); }
    else break;
    next();
    TMPL_TRY(right, parse_math1());
    if (!cmp) cmp = std::make_unique<CompareExpr>(p, std::move(first));
    cmp->rest.emplace_back(op, std::move(right));
  }
  if (!cmp) return first;
  return finish(std::move(cmp));
}

Result<ExprPtr> ExprParser::binary(Pos p, BinaryOp op, ExprPtr l, ExprPtr r) {
  return finish(std::make_unique<BinaryExpr>(p, op, std::move(l), std::move(r)));
}

Result<ExprPtr> ExprParser::parse_math1() {
  TMPL_TRY(left, parse_concat());
  while (is_op("+") || is_op("-")) {
    const Pos p = pos_of(cur());
    const BinaryOp op = is_op("+") ? BinaryOp::kAdd : BinaryOp::kSub;
    next();
    TMPL_TRY(right, parse_concat());
    TMPL_TRY(b, binary(p, op, std::move(left), std::move(right)));
    left = std::move(b);
  }
  return left;
}

Result<ExprPtr> ExprParser::parse_concat() {
  TMPL_TRY(left, parse_math2());
  while (is_op("~")) {
    const Pos p = pos_of(cur());
    next();
    TMPL_TRY(right, parse_math2());
    TMPL_TRY(b, binary(p, BinaryOp::kConcat, std::move(left), std::move(right)));
    left = std::move(b);
  }
  return left;
}

Result<ExprPtr> ExprParser::parse_math2() {
  TMPL_TRY(left, parse_pow());
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Pos p = pos_of(cur());
    const std::string& o = cur().text;
    const BinaryOp op = o == "*" ? BinaryOp::kMul : o == "/" ? BinaryOp::kDiv : o == "//" ? BinaryOp::kFloorDiv : BinaryOp::kMod;
    next();
    TMPL_TRY(right, parse_pow());
    TMPL_TRY(b, binary(p, op, std::move(left), std::move(right)));
    left = std::move(b);
  }
  return left;
}

// Left-associative, and binds looser than unary minus: -2**2 == 4 in Jinja2.
Result<ExprPtr> ExprParser::parse_pow() {
  TMPL_TRY(left, parse_unary(true));
  while (is_op("**")) {
    const Pos p = pos_of(cur());
    next();
    TMPL_TRY(right, parse_unary(true));
    TMPL_TRY(b, binary(p, BinaryOp::kPow, std::move(left), std::move(right)));
    left = std::move(b);
  }
  return left;
}

Result<ExprPtr> ExprParser::parse_unary(bool with_filter) {
  const Pos p = pos_of(cur());
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    const UnaryOp op = is_op("-") ? UnaryOp::kNeg : UnaryOp::kPos;
    next();
    if (++nesting_ > kMaxExprDepth) return fail(cur(), "expression nested too deeply");
    TMPL_TRY(operand, parse_unary(false));
    --nesting_;
    TMPL_TRY(u, finish(std::make_unique<UnaryExpr>(p, op, std::move(operand))));
    node = std::move(u);
  } else {
    TMPL_TRY(prim, parse_primary());
    node = std::move(prim);
  }
  TMPL_TRY(post, parse_postfix(std::move(node)));
  node = std::move(post);
  if (with_filter) {
    TMPL_TRY(f, parse_filter_expr(std::move(node)));
    node = std::move(f);
  }
  return node;
}

Result<ExprPtr> ExprParser::parse_primary() {
  const Token& t = cur();
  const Pos p = pos_of(t);
  switch (t.kind) {
    case TokenKind::kName: {
      ExprPtr e;
      if (t.text == "true" || t.text == "True") e = std::make_unique<LiteralExpr>(p, Value::boolean(true));
      else if (t.text == "false" || t.text == "False") e = std::make_unique<LiteralExpr>(p, Value::boolean(false));
      else if (t.text == "none" || t.text == "None") e = std::make_unique<LiteralExpr>(p, Value::none());
      else {
        if (t.text == "varargs" || t.text == "kwargs" || t.text == "caller")
          for (MacroStmt* m : macro_stack_) {
            if (t.text == "varargs") m->uses_varargs = true;
            else if (t.text == "kwargs") m->uses_kwargs = true;
            else m->uses_caller = true;
          }
        e = std::make_unique<NameExpr>(p, t.text);
      }
      next();
      return finish(std::move(e));
    }
    case TokenKind::kString: {
      std::string s = t.text;
      next();
      while (cur().kind == TokenKind::kString) { s += cur().text; next(); }
      return finish(std::make_unique<LiteralExpr>(p, Value::string(std::move(s))));
    }
    case TokenKind::kInt: {
      auto e = std::make_unique<LiteralExpr>(p, Value::integer(t.int_value));
      next();
      return finish(std::move(e));
    }
    case TokenKind::kFloat: {
      auto e = std::make_unique<LiteralExpr>(p, Value::number(t.float_value));
      next();
      return finish(std::move(e));
    }
    case TokenKind::kOp:
      if (t.text == "(") {
        next();
        TMPL_TRY(e, parse_tuple(false, true, {}, true));
        TMPL_CHECK(expect_op(")"));
        return e;
      }
      if (t.text == "[") return parse_list();
      if (t.text == "{") return parse_dict();
      break;
    default: break;
  }
  return fail(t, fmt::format("unexpected {}", describe(t)));
}

Result<ExprPtr> ExprParser::parse_list() {
  auto l = std::make_unique<SeqExpr>(ExprKind::kList, pos_of(cur()));
  next();
  while (!is_op("]")) {
    if (!l->items.empty()) TMPL_CHECK(expect_op(","));
    if (is_op("]")) break;
    TMPL_TRY(e, parse_expression(true));
    l->items.push_back(std::move(e));
  }
  next();
  return finish(std::move(l));
}

Result<ExprPtr> ExprParser::parse_dict() {
  auto d = std::make_unique<DictExpr>(pos_of(cur()));
  next();
  while (!is_op("}")) {
    if (!d->items.empty()) TMPL_CHECK(expect_op(","));
    if (is_op("}")) break;
    TMPL_TRY(k, parse_expression(true));
    TMPL_CHECK(expect_op(":"));
    TMPL_TRY(v, parse_expression(true));
    d->items.emplace_back(std::move(k), std::move(v));
  }
  next();
  return finish(std::move(d));
}

Result<ExprPtr> ExprParser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      TMPL_TRY(s, parse_subscript(std::move(node)));
      node = std::move(s);
    } else if (is_op("(")) {
      TMPL_TRY(c, parse_call(std::move(node)));
      node = std::move(c);
    } else {
      return node;
    }
  }
}

Result<ExprPtr> ExprParser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      TMPL_TRY(f, parse_filter(std::move(node), false));
      node = std::move(f);
    } else if (is_name("is")) {
      TMPL_TRY(t, parse_test(std::move(node)));
      node = std::move(t);
    } else if (is_op("(")) {
      TMPL_TRY(c, parse_call(std::move(node)));
      node = std::move(c);
    } else {
      return node;
    }
  }
}

Result<ExprPtr> ExprParser::parse_subscript(ExprPtr node) {
  const Token& t = cur();
  const Pos p = pos_of(t);
  if (t.text == ".") {
    next();
    const Token& a = cur();
    if (a.kind == TokenKind::kName) {
      std::string name = a.text;
      next();
      return finish(std::make_unique<AttrExpr>(p, std::move(node), std::move(name)));
    }
    if (a.kind != TokenKind::kInt) return fail(a, "expected name or number");
    auto idx = std::make_unique<LiteralExpr>(pos_of(a), Value::integer(a.int_value));
    next();
    return finish(std::make_unique<ItemExpr>(p, std::move(node), std::move(idx)));
  }
  next();  // '['
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) TMPL_CHECK(expect_op(","));
    TMPL_TRY(a, parse_subscribed(node, p));
    if (a->kind == ExprKind::kSlice) {  // the slice took `node` as its object
      if (!args.empty()) return fail(t, "a slice cannot be combined with other subscripts");
      TMPL_CHECK(expect_op("]"));
      return a;
    }
    args.push_back(std::move(a));
  }
  next();
  if (args.empty()) return fail(t, "expected subscript expression");
  ExprPtr index;
  if (args.size() == 1) {
    index = std::move(args[0]);
  } else {
    auto tup = std::make_unique<SeqExpr>(ExprKind::kTuple, p);
    tup->items = std::move(args);
    TMPL_TRY(f, finish(std::move(tup)));
    index = std::move(f);
  }
  return finish(std::make_unique<ItemExpr>(p, std::move(node), std::move(index)));
}

// One subscript element: an expression, or a slice (which then owns `node`).
Result<ExprPtr> ExprParser::parse_subscribed(ExprPtr& node, Pos p) {
  ExprPtr start;
  if (!is_op(":")) {
    TMPL_TRY(e, parse_expression(true));
    if (!is_op(":")) return e;
    start = std::move(e);
  }
  next();  // ':'
  auto s = std::make_unique<SliceExpr>(p, std::move(node));
  s->start = std::move(start);
  if (!is_op(":") && !is_op("]") && !is_op(",")) {
    TMPL_TRY(e, parse_expression(true));
    s->stop = std::move(e);
  }
  if (skip_op(":")) {
    if (!is_op("]") && !is_op(",")) {
      TMPL_TRY(e, parse_expression(true));
      s->step = std::move(e);
    }
  }
  return finish(std::move(s));
}

Result<ArgList> ExprParser::parse_call_args() {
  const Token& open = cur();
  TMPL_CHECK(expect_op("("));
  ArgList a;
  bool require_comma = false;
  auto bad = [&] { return fail(open, "invalid syntax for function call expression"); };
  while (!is_op(")")) {
    if (require_comma) {
      TMPL_CHECK(expect_op(","));
      if (is_op(")")) break;
    }
    if (is_op("*")) {
      if (a.star || a.star_star) return bad();
      next();
      TMPL_TRY(e, parse_expression(true));
      a.star = std::move(e);
    } else if (is_op("**")) {
      if (a.star_star) return bad();
      next();
      TMPL_TRY(e, parse_expression(true));
      a.star_star = std::move(e);
    } else if (cur().kind == TokenKind::kName && look().kind == TokenKind::kOp && look().text == "=") {
      if (a.star_star) return bad();
      std::string key = cur().text;
      next();
      next();
      TMPL_TRY(e, parse_expression(true));
      a.kw.emplace_back(std::move(key), std::move(e));
    } else {
      if (a.star || a.star_star || !a.kw.empty()) return bad();
      TMPL_TRY(e, parse_expression(true));
      a.pos.push_back(std::move(e));
    }
    require_comma = true;
  }
  next();
  return a;
}

Result<ExprPtr> ExprParser::parse_call(ExprPtr callee) {
  const Pos p = pos_of(cur());
  TMPL_TRY(args, parse_call_args());
  auto c = std::make_unique<CallExpr>(p, std::move(callee));
  c->args = std::move(args);
  return finish(std::move(c));
}

Result<ExprPtr> ExprParser::parse_filter(ExprPtr node, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    const Pos p = pos_of(cur());
    TMPL_TRY(name, expect_name());
    while (skip_op(".")) {
      TMPL_TRY(part, expect_name());
      name += "." + part;
    }
    auto f = std::make_unique<FilterExpr>(p, std::move(node), std::move(name));
    if (is_op("(")) {
      TMPL_TRY(args, parse_call_args());
      f->args = std::move(args);
    }
    TMPL_TRY(fin, finish(std::move(f)));
    node = std::move(fin);
  }
  return node;
}

Result<ExprPtr> ExprParser::parse_test(ExprPtr node) {
  const Pos p = pos_of(cur());
  next();  // 'is'
  const bool negated = skip_name("not");
  TMPL_TRY(name, expect_name());
  while (skip_op(".")) {
    TMPL_TRY(part, expect_name());
    name += "." + part;
  }
  auto t = std::make_unique<TestExpr>(p, std::move(node), std::move(name));
  t->negated = negated;
  const Token& c = cur();
  const bool arg_start = c.kind == TokenKind::kName || c.kind == TokenKind::kString || c.kind == TokenKind::kInt ||
                         c.kind == TokenKind::kFloat || (c.kind == TokenKind::kOp && (c.text == "[" || c.text == "{"));
  if (is_op("(")) {
    TMPL_TRY(args, parse_call_args());
    t->args = std::move(args);
  } else if (arg_start && !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) return fail(c, "You cannot chain multiple tests with is");
    TMPL_TRY(arg, parse_primary());
    TMPL_TRY(post, parse_postfix(std::move(arg)));
    t->args.pos.push_back(std::move(post));
  }
  return finish(std::move(t));
}

}  // namespace cadenza::tmpl
