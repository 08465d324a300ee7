#include "template/interpreter.h"

#include <nlohmann/json.hpp>

#include "template/builtins.h"
#include "template/format.h"
#include "template/operators.h"
#include "template/strings.h"
#include "template/try.h"

namespace cadenza::tmpl {
namespace {

// Arena caps: far above what templates use, low enough that memory stays bounded even when
// the step budget is spent creating objects.
constexpr size_t kMaxScopes = 100'000;
constexpr size_t kMaxNamespaces = 100'000;

}  // namespace

const Value* Scope::find(std::string_view name) const {
  for (const auto& [k, v] : vars)
    if (k == name) return &v;
  return nullptr;
}

void Scope::set(std::string_view name, Value v) {
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(v));
}

Interpreter::Interpreter(const RenderOptions& options) : opts_(options) {}

Result<std::string> Interpreter::render(const Program& program, const nlohmann::ordered_json& context) {
  stack_base_ = static_cast<const char*>(__builtin_frame_address(0));
  if (!context.is_object()) return Error("TypeError: the render context must be a JSON object");
  TMPL_TRY(root, new_scope(nullptr));
  for (const auto& [key, value] : context.items()) {
    TMPL_TRY(v, from_json(value));
    root->set(key, std::move(v));
  }
  std::string out;
  out_ = &out;
  TMPL_TRY(flow, exec_body(program.body, root));
  (void)flow;
  return out;
}

// ---- limits and errors ----

Status Interpreter::charge(uint64_t units) {
  steps_ += units;
  if (steps_ > opts_.max_steps)
    return Error(fmt::format("LimitError: the template ran more than {} steps", opts_.max_steps));
  return {};
}

Status Interpreter::charge_size(size_t bytes) {
  if (bytes > opts_.max_output_bytes)
    return Error(fmt::format("LimitError: a value of {} bytes exceeds the {} byte limit", bytes, opts_.max_output_bytes));
  return charge(1 + bytes / 1024);
}

// Builtins are linear in their operands (search, compare, copy); charging operand sizes bounds
// the time a template can spend in them, whatever sizes the request brings.
Status Interpreter::charge_work(const Value& v) {
  if (v.is_string()) return charge(v.str().size() / 1024);
  if (v.kind() == Value::Kind::kList) return charge(v.list().items.size());
  if (v.is_dict()) return charge(v.dict().items.size());
  return {};
}

Status Interpreter::charge_work(const CallArgs& args) {
  for (const Value& v : args.pos) TMPL_CHECK(charge_work(v));
  for (const auto& [k, v] : args.kw) TMPL_CHECK(charge_work(v));
  return {};
}

Status Interpreter::check_stack() const {
  const auto* here = static_cast<const char*>(__builtin_frame_address(0));
  if (stack_base_ && stack_base_ > here && static_cast<size_t>(stack_base_ - here) > opts_.max_stack_bytes)
    return Error(fmt::format("RecursionError: the template nests too deeply (over {} bytes of stack)", opts_.max_stack_bytes));
  return {};
}

// "Kind: message" becomes "Kind at L:C: message" at the innermost node the error passes.
// raise_exception's "TemplateError: msg" is the template author's message and stays as written.
Error Interpreter::locate(Error e, Pos pos) {
  if (located_ || pos.line == 0) return e;
  located_ = true;
  if (e.message.rfind("TemplateError: ", 0) == 0) return e;
  const size_t colon = e.message.find(": ");
  if (colon == std::string::npos || e.message.find(' ') < colon) {
    e.message = fmt::format("TemplateRuntimeError at {}:{}: {}", pos.line, pos.col, e.message);
  } else {
    e.message = fmt::format("{} at {}:{}: {}", e.message.substr(0, colon), pos.line, pos.col, e.message.substr(colon + 2));
  }
  return e;
}

Status Interpreter::write(std::string_view s) {
  if (out_->size() + s.size() > opts_.max_output_bytes)
    return Error(fmt::format("LimitError: the output exceeds {} bytes", opts_.max_output_bytes));
  TMPL_CHECK(charge(s.size() / 1024));
  out_->append(s);
  return {};
}

// ---- scopes ----

Result<Scope*> Interpreter::new_scope(Scope* parent) {
  Scope* s;
  if (!free_scopes_.empty()) {
    s = free_scopes_.back();
    free_scopes_.pop_back();
  } else {
    if (scopes_.size() >= kMaxScopes) return Error(fmt::format("LimitError: more than {} scopes", kMaxScopes));
    s = &scopes_.emplace_back();
  }
  s->parent = parent;
  s->captured = false;
  s->vars.clear();
  return s;
}

void Interpreter::release_scope(Scope* s) {
  if (s->captured) return;
  s->vars.clear();
  free_scopes_.push_back(s);
}

Value Interpreter::lookup(std::string_view name, const Scope* s) const {
  for (const Scope* p = s; p; p = p->parent)
    if (const Value* v = p->find(name)) return *v;
  if (auto g = find_global(name)) return *g;
  return Value::undefined(fmt::format("UndefinedError: '{}' is undefined", name));
}

Result<Namespace*> Interpreter::new_namespace() {
  if (namespaces_.size() >= kMaxNamespaces)
    return Error(fmt::format("LimitError: more than {} namespaces", kMaxNamespaces));
  TMPL_CHECK(charge(16));
  return &namespaces_.emplace_back();
}

std::string Interpreter::strftime_now(std::string_view fmt) const {
  if (opts_.strftime_now) return opts_.strftime_now(fmt);
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  return format_time(tm, fmt);
}

// ---- statements ----

Result<Interpreter::Flow> Interpreter::exec_body(const Body& body, Scope* s) {
  for (const auto& st : body) {
    TMPL_TRY(flow, exec(*st, s));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Result<std::string> Interpreter::capture(const Body& body, Scope* s) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  auto r = exec_body(body, s);
  out_ = saved;
  if (!r) return r.error_value();
  return buf;
}

Result<Interpreter::Flow> Interpreter::exec(const Stmt& st, Scope* s) {
  if (auto c = check_stack(); !c) return locate(c.error_value(), st.pos);
  if (auto c = charge(1); !c) return locate(c.error_value(), st.pos);
  auto fail = [&](const Error& e) { return locate(e, st.pos); };
  switch (st.kind) {
    case StmtKind::kText: {
      auto w = write(static_cast<const TextStmt&>(st).text);
      if (!w) return fail(w.error_value());
      return Flow::kNormal;
    }
    case StmtKind::kOutput: {
      TMPL_TRY(v, eval(*static_cast<const OutputStmt&>(st).expr, s));
      auto w = write(to_str(v));
      if (!w) return fail(w.error_value());
      return Flow::kNormal;
    }
    case StmtKind::kIf: {
      const auto& x = static_cast<const IfStmt&>(st);
      for (const auto& [cond, body] : x.branches) {
        TMPL_TRY(c, eval(*cond, s));
        if (truthy(c)) return exec_body(body, s);
      }
      return exec_body(x.otherwise, s);
    }
    case StmtKind::kFor: return exec_for(static_cast<const ForStmt&>(st), s, nullptr, 0);
    case StmtKind::kSet: {
      const auto& x = static_cast<const SetStmt&>(st);
      TMPL_TRY(v, eval(*x.value, s));
      auto a = assign(x.target, std::move(v), s);
      if (!a) return fail(a.error_value());
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      const auto& x = static_cast<const SetBlockStmt&>(st);
      TMPL_TRY(inner, new_scope(s));
      auto text = capture(x.body, inner);
      release_scope(inner);
      if (!text) return text.error_value();
      Value v = Value::string(std::move(*text));
      if (x.filter) {
        TMPL_TRY(f, eval_filter_chain(static_cast<const FilterExpr&>(*x.filter), s, &v));
        v = std::move(f);
      }
      auto a = assign(x.target, std::move(v), s);
      if (!a) return fail(a.error_value());
      return Flow::kNormal;
    }
    case StmtKind::kMacro: {
      const auto& x = static_cast<const MacroStmt&>(st);
      auto c = std::make_shared<Callable>();
      c->kind = Callable::Kind::kMacro;
      c->name = x.name;
      c->macro = &x;
      c->closure = s;
      s->captured = true;
      s->set(x.name, Value::callable(std::move(c)));
      return Flow::kNormal;
    }
    case StmtKind::kCallBlock: {
      const auto& x = static_cast<const CallBlockStmt&>(st);
      auto caller = std::make_shared<Callable>();
      caller->kind = Callable::Kind::kMacro;
      caller->name = "caller";
      caller->macro = x.caller.get();
      caller->closure = s;
      s->captured = true;
      TMPL_TRY(callee, eval(*x.call->callee, s));
      TMPL_TRY(args, eval_args(x.call->args, s));
      args.kw.emplace_back("caller", Value::callable(std::move(caller)));
      auto r = call(callee, std::move(args));
      if (!r) return fail(r.error_value());
      auto w = write(to_str(*r));
      if (!w) return fail(w.error_value());
      return Flow::kNormal;
    }
    case StmtKind::kFilterBlock: {
      const auto& x = static_cast<const FilterBlockStmt&>(st);
      TMPL_TRY(inner, new_scope(s));
      auto text = capture(x.body, inner);
      release_scope(inner);
      if (!text) return text.error_value();
      Value v = Value::string(std::move(*text));
      TMPL_TRY(f, eval_filter_chain(static_cast<const FilterExpr&>(*x.filter), s, &v));
      auto w = write(to_str(f));
      if (!w) return fail(w.error_value());
      return Flow::kNormal;
    }
    case StmtKind::kWith: {
      const auto& x = static_cast<const WithStmt&>(st);
      std::vector<Value> values;
      for (const auto& [t, e] : x.assigns) {
        TMPL_TRY(v, eval(*e, s));
        values.push_back(std::move(v));
      }
      TMPL_TRY(inner, new_scope(s));
      for (size_t i = 0; i < values.size(); ++i) {
        auto a = assign(x.assigns[i].first, std::move(values[i]), inner);
        if (!a) return fail(a.error_value());
      }
      auto r = exec_body(x.body, inner);
      release_scope(inner);
      return r;
    }
    case StmtKind::kScope: {
      TMPL_TRY(inner, new_scope(s));
      auto r = exec_body(static_cast<const ScopeStmt&>(st).body, inner);
      release_scope(inner);
      return r;
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
  }
  return Flow::kNormal;
}

Result<Interpreter::Flow> Interpreter::exec_for(const ForStmt& f, Scope* s, const Value* items_override, int64_t depth0) {
  Value iterable;
  if (items_override) {
    iterable = *items_override;
  } else {
    TMPL_TRY(v, eval(*f.iter, s));
    iterable = std::move(v);
  }
  auto items_res = iterate(iterable);
  if (!items_res) return locate(items_res.error_value(), f.iter->pos);
  std::vector<Value> items = std::move(*items_res);

  if (f.filter) {
    std::vector<Value> kept;
    TMPL_TRY(fs, new_scope(s));
    for (Value& item : items) {
      TMPL_CHECK(charge(1));
      fs->vars.clear();
      auto a = assign(f.target, item, fs);
      if (!a) return locate(a.error_value(), f.pos);
      TMPL_TRY(c, eval(*f.filter, fs));
      if (truthy(c)) kept.push_back(std::move(item));
    }
    release_scope(fs);
    items = std::move(kept);
  }

  if (items.empty()) {
    TMPL_TRY(inner, new_scope(s));
    auto r = exec_body(f.otherwise, inner);
    release_scope(inner);
    if (!r) return r.error_value();
    return Flow::kNormal;
  }

  auto state = std::make_shared<LoopState>();
  state->items = std::move(items);
  state->depth0 = depth0;
  state->stmt = &f;
  state->outer = s;
  const Value loop_value = Value::loop(state);
  TMPL_TRY(body_scope, new_scope(s));
  Scope* ls = body_scope;
  const size_t n = state->items.size();
  for (size_t i = 0; i < n; ++i) {
    if (auto c = charge(1); !c) return locate(c.error_value(), f.pos);
    if (ls->captured) {  // a macro defined in the previous iteration keeps that scope
      TMPL_TRY(fresh, new_scope(s));
      ls = fresh;
    } else {
      ls->vars.clear();
    }
    state->index = i;
    auto a = assign(f.target, state->items[i], ls);
    if (!a) return locate(a.error_value(), f.pos);
    ls->set("loop", loop_value);
    TMPL_TRY(flow, exec_body(f.body, ls));
    if (flow == Flow::kBreak) break;
  }
  release_scope(ls);
  return Flow::kNormal;
}

Result<Value> Interpreter::recurse_loop(LoopState& state, const Value& items) {
  if (++call_depth_ > opts_.max_call_depth)
    return Error(fmt::format("RecursionError: recursive loop nested more than {} levels", opts_.max_call_depth));
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  auto r = exec_for(*state.stmt, state.outer, &items, state.depth0 + 1);
  out_ = saved;
  --call_depth_;
  if (!r) return r.error_value();
  return Value::string(std::move(buf));
}

Status Interpreter::assign(const Target& t, Value v, Scope* s) {
  switch (t.kind) {
    case Target::Kind::kName:
      s->set(t.name, std::move(v));
      return {};
    case Target::Kind::kNsAttr: {
      Value ns = lookup(t.name, s);
      if (!ns.is_namespace())
        return Error(fmt::format("TemplateRuntimeError: cannot assign attribute on non-namespace object ('{}' is {})",
                                 t.name, type_name(ns)));
      ns.ns()->set(t.attr, std::move(v));
      return {};
    }
    case Target::Kind::kTuple: {
      if (v.is_undefined()) return undefined_error(v);
      TMPL_TRY(items, iterate(v));
      if (items.size() < t.items.size())
        return Error(fmt::format("ValueError: not enough values to unpack (expected {}, got {})", t.items.size(), items.size()));
      if (items.size() > t.items.size())
        return Error(fmt::format("ValueError: too many values to unpack (expected {})", t.items.size()));
      for (size_t i = 0; i < items.size(); ++i) TMPL_CHECK(assign(t.items[i], std::move(items[i]), s));
      return {};
    }
  }
  return {};
}

// ---- calls ----

Result<Value> Interpreter::call(const Value& callee, CallArgs args) {
  switch (callee.kind()) {
    case Value::Kind::kUndefined: return undefined_error(callee);
    case Value::Kind::kCallable: {
      const Callable& c = callee.callable();
      if (c.kind == Callable::Kind::kMacro) return call_macro(c, std::move(args));
      TMPL_CHECK(charge_work(c.self));
      TMPL_CHECK(charge_work(args));
      return c.fn(*this, c.self, std::move(args));
    }
    case Value::Kind::kLoop: {
      if (args.pos.size() != 1 || !args.kw.empty())
        return Error("TypeError: loop() takes exactly one argument (the items to recurse into)");
      if (!callee.loop_state()->stmt->recursive)
        return Error("TypeError: Tried to call non recursive loop. Maybe you forgot the 'recursive' modifier.");
      return recurse_loop(*callee.loop_state(), args.pos[0]);
    }
    default: return Error(fmt::format("TypeError: '{}' object is not callable", type_name(callee)));
  }
}

Result<Value> Interpreter::call_macro(const Callable& c, CallArgs args) {
  const MacroStmt& m = *c.macro;
  if (call_depth_ + 1 > opts_.max_call_depth)
    return Error(fmt::format("RecursionError: macro calls nested more than {} levels", opts_.max_call_depth));
  TMPL_TRY(s, new_scope(c.closure));
  std::vector<bool> given(m.params.size(), false);
  std::vector<Value> extra_pos;
  std::vector<std::pair<Value, Value>> extra_kw;
  Value caller;
  for (size_t i = 0; i < args.pos.size(); ++i) {
    if (i < m.params.size()) {
      s->set(m.params[i].first, std::move(args.pos[i]));
      given[i] = true;
    } else {
      extra_pos.push_back(std::move(args.pos[i]));
    }
  }
  if (!extra_pos.empty() && !m.uses_varargs)
    return Error(fmt::format("TypeError: macro '{}' takes not more than {} argument(s)", m.name, m.params.size()));
  for (auto& [k, v] : args.kw) {
    size_t idx = 0;
    while (idx < m.params.size() && m.params[idx].first != k) ++idx;
    if (idx < m.params.size()) {
      if (given[idx]) return Error(fmt::format("TypeError: macro '{}' got multiple values for argument '{}'", m.name, k));
      s->set(k, std::move(v));
      given[idx] = true;
    } else if (k == "caller" && m.uses_caller) {
      caller = std::move(v);
    } else if (m.uses_kwargs) {
      extra_kw.emplace_back(Value::string(k), std::move(v));
    } else {
      return Error(fmt::format("TypeError: macro '{}' takes no keyword argument '{}'", m.name, k));
    }
  }
  ++call_depth_;
  // Defaults are evaluated in the macro's scope, so they can refer to earlier parameters.
  for (size_t i = 0; i < m.params.size(); ++i) {
    if (given[i]) continue;
    if (m.params[i].second) {
      auto d = eval(*m.params[i].second, s);
      if (!d) {
        --call_depth_;
        return d.error_value();
      }
      s->set(m.params[i].first, std::move(*d));
    } else {
      s->set(m.params[i].first,
             Value::undefined(fmt::format("UndefinedError: parameter '{}' was not provided", m.params[i].first)));
    }
  }
  if (m.uses_varargs) {
    TMPL_TRY(l, make_list(std::move(extra_pos), true));
    s->set("varargs", std::move(l));
  }
  if (m.uses_kwargs) {
    TMPL_TRY(d, make_dict(std::move(extra_kw)));
    s->set("kwargs", std::move(d));
  }
  if (m.uses_caller) s->set("caller", caller.is_undefined() ? Value::undefined("UndefinedError: No caller defined") : caller);
  auto text = capture(m.body, s);
  --call_depth_;
  release_scope(s);
  if (!text) return text.error_value();
  return Value::string(std::move(*text));
}

Result<CallArgs> Interpreter::eval_args(const ArgList& a, Scope* s) {
  CallArgs out;
  for (const auto& e : a.pos) {
    TMPL_TRY(v, eval(*e, s));
    out.pos.push_back(std::move(v));
  }
  if (a.star) {
    TMPL_TRY(v, eval(*a.star, s));
    TMPL_TRY(items, iterate(v));
    for (Value& item : items) out.pos.push_back(std::move(item));
  }
  for (const auto& [k, e] : a.kw) {
    TMPL_TRY(v, eval(*e, s));
    out.kw.emplace_back(k, std::move(v));
  }
  if (a.star_star) {
    TMPL_TRY(v, eval(*a.star_star, s));
    if (!v.is_dict()) return Error(fmt::format("TypeError: argument after ** must be a mapping, not {}", type_name(v)));
    for (const auto& [k, item] : v.dict().items) {
      if (!k.is_string()) return Error("TypeError: keywords must be strings");
      out.kw.emplace_back(k.str(), item);
    }
  }
  return out;
}

// ---- expressions ----

Result<Value> Interpreter::eval(const Expr& e, Scope* s) {
  if (auto c = check_stack(); !c) return locate(c.error_value(), e.pos);
  if (auto c = charge(1); !c) return locate(c.error_value(), e.pos);
  auto r = eval_inner(e, s);
  if (!r) return locate(r.error_value(), e.pos);
  return r;
}

Result<Value> Interpreter::eval_filter_chain(const FilterExpr& f, Scope* s, const Value* input) {
  Value operand;
  if (f.operand) {
    if (f.operand->kind == ExprKind::kFilter && input) {
      TMPL_TRY(v, eval_filter_chain(static_cast<const FilterExpr&>(*f.operand), s, input));
      operand = std::move(v);
    } else {
      TMPL_TRY(v, eval(*f.operand, s));
      operand = std::move(v);
    }
  } else if (input) {
    operand = *input;
  }
  TMPL_TRY(args, eval_args(f.args, s));
  TMPL_CHECK(charge_work(operand));
  TMPL_CHECK(charge_work(args));
  auto r = apply_filter(*this, f.name, std::move(operand), std::move(args));
  if (!r) return locate(r.error_value(), f.pos);
  return r;
}

Result<Value> Interpreter::eval_compare(const CompareExpr& c, Scope* s) {
  TMPL_TRY(left, eval(*c.first, s));
  for (const auto& [op, expr] : c.rest) {
    TMPL_TRY(right, eval(*expr, s));
    TMPL_CHECK(charge_work(left));
    TMPL_CHECK(charge_work(right));
    TMPL_TRY(ok, compare_op(op, left, right));
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Result<Value> Interpreter::eval_slice(const SliceExpr& e, Scope* s) {
  TMPL_TRY(obj, eval(*e.obj, s));
  if (obj.is_undefined()) return undefined_error(obj);
  std::optional<int64_t> parts[3];
  const Expr* exprs[3] = {e.start.get(), e.stop.get(), e.step.get()};
  for (int i = 0; i < 3; ++i) {
    if (!exprs[i]) continue;
    TMPL_TRY(v, eval(*exprs[i], s));
    if (v.is_none()) continue;
    if (!v.is_int() && !v.is_bool())
      return Error("TypeError: slice indices must be integers or None or have an __index__ method");
    parts[i] = v.is_bool() ? int64_t{v.as_bool()} : v.as_int();
  }
  const int64_t step = parts[2].value_or(1);
  if (step == 0) return Error("ValueError: slice step cannot be zero");
  if (obj.is_string()) {
    const std::string& str = obj.str();
    if (pystr::is_ascii(str)) {
      std::string out;
      for (int64_t i : pystr::slice_positions(static_cast<int64_t>(str.size()), parts[0], parts[1], step))
        out.push_back(str[static_cast<size_t>(i)]);
      return Value::string(std::move(out));
    }
    std::u32string u = pystr::decode(str);
    std::u32string out;
    for (int64_t i : pystr::slice_positions(static_cast<int64_t>(u.size()), parts[0], parts[1], step))
      out.push_back(u[static_cast<size_t>(i)]);
    return Value::string(pystr::encode(out));
  }
  if (obj.is_list()) {
    const List& l = obj.list();
    std::vector<Value> out;
    for (int64_t i : pystr::slice_positions(static_cast<int64_t>(l.items.size()), parts[0], parts[1], step))
      out.push_back(l.items[static_cast<size_t>(i)]);
    TMPL_CHECK(charge(out.size()));
    return make_list(std::move(out), l.is_tuple);
  }
  // Jinja2 compiles slices to plain Python subscripts, without getitem's undefined fallback.
  if (obj.is_dict()) return Error("TypeError: unhashable type: 'slice'");
  return Error(fmt::format("TypeError: '{}' object is not subscriptable", type_name(obj)));
}

Result<Value> Interpreter::eval_inner(const Expr& e, Scope* s) {
  switch (e.kind) {
    case ExprKind::kLiteral: return static_cast<const LiteralExpr&>(e).value;
    case ExprKind::kName: return lookup(static_cast<const NameExpr&>(e).name, s);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      for (const auto& i : static_cast<const SeqExpr&>(e).items) {
        TMPL_TRY(v, eval(*i, s));
        items.push_back(std::move(v));
      }
      return make_list(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      std::vector<std::pair<Value, Value>> items;
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        TMPL_TRY(key, eval(*k, s));
        if ((key.is_list() && !key.list().is_tuple) || key.is_dict())
          return Error(fmt::format("TypeError: unhashable type: '{}'", type_name(key)));
        TMPL_TRY(val, eval(*v, s));
        items.emplace_back(std::move(key), std::move(val));
      }
      return make_dict(std::move(items));
    }
    case ExprKind::kAttr: {
      const auto& x = static_cast<const AttrExpr&>(e);
      TMPL_TRY(obj, eval(*x.obj, s));
      return getattr(obj, x.name);
    }
    case ExprKind::kItem: {
      const auto& x = static_cast<const ItemExpr&>(e);
      TMPL_TRY(obj, eval(*x.obj, s));
      TMPL_TRY(key, eval(*x.index, s));
      return getitem(obj, key);
    }
    case ExprKind::kSlice: return eval_slice(static_cast<const SliceExpr&>(e), s);
    case ExprKind::kCall: {
      const auto& x = static_cast<const CallExpr&>(e);
      TMPL_TRY(callee, eval(*x.callee, s));
      if (callee.is_undefined()) return undefined_error(callee);
      TMPL_TRY(args, eval_args(x.args, s));
      return call(callee, std::move(args));
    }
    case ExprKind::kFilter: return eval_filter_chain(static_cast<const FilterExpr&>(e), s, nullptr);
    case ExprKind::kTest: {
      const auto& x = static_cast<const TestExpr&>(e);
      TMPL_TRY(v, eval(*x.operand, s));
      TMPL_TRY(args, eval_args(x.args, s));
      TMPL_CHECK(charge_work(v));
      TMPL_CHECK(charge_work(args));
      TMPL_TRY(ok, apply_test(*this, x.name, v, std::move(args)));
      return Value::boolean(ok != x.negated);
    }
    case ExprKind::kUnary: {
      const auto& x = static_cast<const UnaryExpr&>(e);
      TMPL_TRY(v, eval(*x.operand, s));
      if (x.op == UnaryOp::kNot) return Value::boolean(!truthy(v));
      return unary_op(x.op, v);
    }
    case ExprKind::kBinary: {
      const auto& x = static_cast<const BinaryExpr&>(e);
      TMPL_TRY(left, eval(*x.left, s));
      if (x.op == BinaryOp::kAnd) {
        if (!truthy(left)) return left;
        return eval(*x.right, s);
      }
      if (x.op == BinaryOp::kOr) {
        if (truthy(left)) return left;
        return eval(*x.right, s);
      }
      TMPL_TRY(right, eval(*x.right, s));
      TMPL_CHECK(charge_work(left));
      TMPL_CHECK(charge_work(right));
      return binary_op(*this, x.op, left, right);
    }
    case ExprKind::kCompare: return eval_compare(static_cast<const CompareExpr&>(e), s);
    case ExprKind::kCond: {
      const auto& x = static_cast<const CondExpr&>(e);
      TMPL_TRY(c, eval(*x.cond, s));
      if (truthy(c)) return eval(*x.then, s);
      if (x.otherwise) return eval(*x.otherwise, s);
      return Value::undefined(fmt::format(
          "UndefinedError: the inline if-expression on line {} evaluated to false and no else section was defined.",
          e.pos.line));
    }
  }
  return Value();
}

}  // namespace cadenza::tmpl
