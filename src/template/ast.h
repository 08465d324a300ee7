// The syntax tree the parser builds and the interpreter walks. Immutable after parsing, so one
// parsed Template can be rendered by many threads at once.
//
// Nodes are plain structs with a kind tag; the interpreter switches on the tag and static_casts,
// which keeps the node types free of evaluation code.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace cadenza::tmpl {

struct Pos {
  uint32_t line = 0;
  uint32_t col = 0;
};

// ---- Expressions ----

enum class ExprKind : uint8_t {
  kLiteral, kName, kList, kTuple, kDict, kAttr, kItem, kSlice, kCall, kFilter, kTest, kUnary,
  kBinary, kCompare, kCond,
};

struct Expr {
  ExprKind kind;
  Pos pos;
  // Height of this subtree; the parser bounds it so evaluation and destruction recurse a bounded
  // number of levels whatever the template says.
  uint32_t depth = 1;
  explicit Expr(ExprKind k, Pos p) : kind(k), pos(p) {}
  virtual ~Expr() = default;
};
using ExprPtr = std::unique_ptr<Expr>;

struct LiteralExpr : Expr {
  Value value;  // only scalars: none, bool, int, float, string
  LiteralExpr(Pos p, Value v) : Expr(ExprKind::kLiteral, p), value(std::move(v)) {}
};

struct NameExpr : Expr {
  std::string name;
  NameExpr(Pos p, std::string n) : Expr(ExprKind::kName, p), name(std::move(n)) {}
};

// kList or kTuple.
struct SeqExpr : Expr {
  std::vector<ExprPtr> items;
  SeqExpr(ExprKind k, Pos p) : Expr(k, p) {}
};

struct DictExpr : Expr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  explicit DictExpr(Pos p) : Expr(ExprKind::kDict, p) {}
};

// obj.name: attribute first, then item (Jinja2's getattr order).
struct AttrExpr : Expr {
  ExprPtr obj;
  std::string name;
  AttrExpr(Pos p, ExprPtr o, std::string n) : Expr(ExprKind::kAttr, p), obj(std::move(o)), name(std::move(n)) {}
};

// obj[index]: item first, then attribute for string keys.
struct ItemExpr : Expr {
  ExprPtr obj;
  ExprPtr index;
  ItemExpr(Pos p, ExprPtr o, ExprPtr i) : Expr(ExprKind::kItem, p), obj(std::move(o)), index(std::move(i)) {}
};

// obj[start:stop:step]; absent parts are null.
struct SliceExpr : Expr {
  ExprPtr obj, start, stop, step;
  SliceExpr(Pos p, ExprPtr o) : Expr(ExprKind::kSlice, p), obj(std::move(o)) {}
};

struct ArgList {
  std::vector<ExprPtr> pos;
  std::vector<std::pair<std::string, ExprPtr>> kw;
  ExprPtr star;        // *args
  ExprPtr star_star;   // **kwargs
};

struct CallExpr : Expr {
  ExprPtr callee;
  ArgList args;
  CallExpr(Pos p, ExprPtr c) : Expr(ExprKind::kCall, p), callee(std::move(c)) {}
};

// operand | name(args). operand is null for the innermost filter of `{% filter %}` blocks and
// `{% set x | f %}`, where the rendered body is the input.
struct FilterExpr : Expr {
  ExprPtr operand;
  std::string name;
  ArgList args;
  FilterExpr(Pos p, ExprPtr o, std::string n) : Expr(ExprKind::kFilter, p), operand(std::move(o)), name(std::move(n)) {}
};

// operand is [not] name(args)
struct TestExpr : Expr {
  ExprPtr operand;
  std::string name;
  ArgList args;
  bool negated = false;
  TestExpr(Pos p, ExprPtr o, std::string n) : Expr(ExprKind::kTest, p), operand(std::move(o)), name(std::move(n)) {}
};

enum class UnaryOp : uint8_t { kNot, kNeg, kPos };
struct UnaryExpr : Expr {
  UnaryOp op;
  ExprPtr operand;
  UnaryExpr(Pos p, UnaryOp o, ExprPtr e) : Expr(ExprKind::kUnary, p), op(o), operand(std::move(e)) {}
};

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat, kAnd, kOr };
struct BinaryExpr : Expr {
  BinaryOp op;
  ExprPtr left, right;
  BinaryExpr(Pos p, BinaryOp o, ExprPtr l, ExprPtr r)
      : Expr(ExprKind::kBinary, p), op(o), left(std::move(l)), right(std::move(r)) {}
};

enum class CompareOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };
// first op1 second op2 third ...: Python's chained comparison.
struct CompareExpr : Expr {
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
  CompareExpr(Pos p, ExprPtr f) : Expr(ExprKind::kCompare, p), first(std::move(f)) {}
};

// then if cond else otherwise (otherwise null: undefined).
struct CondExpr : Expr {
  ExprPtr cond, then, otherwise;
  CondExpr(Pos p, ExprPtr c, ExprPtr t, ExprPtr o)
      : Expr(ExprKind::kCond, p), cond(std::move(c)), then(std::move(t)), otherwise(std::move(o)) {}
};

// ---- Statements ----

enum class StmtKind : uint8_t {
  kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kCallBlock, kFilterBlock, kWith, kBreak,
  kContinue, kScope,
};

struct Stmt {
  StmtKind kind;
  Pos pos;
  explicit Stmt(StmtKind k, Pos p) : kind(k), pos(p) {}
  virtual ~Stmt() = default;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// What `set`, `for` and `with` assign to: a name, ns.attr, or a (nested) tuple of names.
struct Target {
  enum class Kind : uint8_t { kName, kNsAttr, kTuple };
  Kind kind = Kind::kName;
  std::string name;
  std::string attr;  // kNsAttr
  std::vector<Target> items;  // kTuple
};

struct TextStmt : Stmt {
  std::string text;
  TextStmt(Pos p, std::string t) : Stmt(StmtKind::kText, p), text(std::move(t)) {}
};

struct OutputStmt : Stmt {
  ExprPtr expr;
  OutputStmt(Pos p, ExprPtr e) : Stmt(StmtKind::kOutput, p), expr(std::move(e)) {}
};

struct IfStmt : Stmt {
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body otherwise;
  explicit IfStmt(Pos p) : Stmt(StmtKind::kIf, p) {}
};

struct ForStmt : Stmt {
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // `for x in xs if cond`; may be null
  Body body;
  Body otherwise;
  bool recursive = false;
  explicit ForStmt(Pos p) : Stmt(StmtKind::kFor, p) {}
};

struct SetStmt : Stmt {
  Target target;
  ExprPtr value;
  explicit SetStmt(Pos p) : Stmt(StmtKind::kSet, p) {}
};

// {% set x [| filters] %}body{% endset %}
struct SetBlockStmt : Stmt {
  Target target;
  ExprPtr filter;  // FilterExpr chain with a null innermost operand; may be null
  Body body;
  explicit SetBlockStmt(Pos p) : Stmt(StmtKind::kSetBlock, p) {}
};

struct MacroStmt : Stmt {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  Body body;
  // Jinja2 accepts extra positional / keyword arguments and `caller` only when the body uses
  // `varargs` / `kwargs` / `caller`.
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
  explicit MacroStmt(Pos p) : Stmt(StmtKind::kMacro, p) {}
};

// {% call(params) macro(args) %}body{% endcall %}: `caller` is a macro made of params + body.
struct CallBlockStmt : Stmt {
  std::unique_ptr<CallExpr> call;
  std::unique_ptr<MacroStmt> caller;
  explicit CallBlockStmt(Pos p) : Stmt(StmtKind::kCallBlock, p) {}
};

struct FilterBlockStmt : Stmt {
  ExprPtr filter;  // FilterExpr chain with a null innermost operand
  Body body;
  explicit FilterBlockStmt(Pos p) : Stmt(StmtKind::kFilterBlock, p) {}
};

struct WithStmt : Stmt {
  std::vector<std::pair<Target, ExprPtr>> assigns;
  Body body;
  explicit WithStmt(Pos p) : Stmt(StmtKind::kWith, p) {}
};

// {% block %}, {% generation %} (Hugging Face's assistant-mask tag), {% autoescape %}: the body
// rendered in place, in its own scope.
struct ScopeStmt : Stmt {
  Body body;
  explicit ScopeStmt(Pos p) : Stmt(StmtKind::kScope, p) {}
};

struct LoopControlStmt : Stmt {
  explicit LoopControlStmt(StmtKind k, Pos p) : Stmt(k, p) {}
};

// A whole parsed template.
struct Program {
  Body body;
};

}  // namespace cadenza::tmpl
