// Interpreter: one render of a parsed template. Walks the statement tree with Jinja2's scoping
// rules and enforces the resource limits of RenderOptions. Not thread-safe; each render makes its
// own (Template::render does this).
//
// Scoping, as Jinja2 behaves:
//   - the root scope holds the context; top-level `set` writes there (shadowing the context);
//   - each for-loop iteration gets a fresh scope: `set` inside a loop does not leak out, nor into
//     the next iteration; `if` makes no scope;
//   - a macro call's scope has the macro's defining scope as parent (closure by reference, so it
//     sees top-level variables set before the call);
//   - namespace objects are shared by reference, which is how templates carry state out of loops.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "template/ast.h"
#include "template/template.h"
#include "template/value.h"
#include "util/result.h"

namespace cadenza::tmpl {

struct Scope {
  Scope* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;
  bool captured = false;  // a macro closes over it, so it is never recycled

  const Value* find(std::string_view name) const;
  void set(std::string_view name, Value v);
};

// The `loop` variable of one for-loop execution.
struct LoopState {
  std::vector<Value> items;
  size_t index = 0;
  int64_t depth0 = 0;
  const ForStmt* stmt = nullptr;  // for loop(...) in recursive loops
  Scope* outer = nullptr;
  bool has_changed_value = false;  // loop.changed() state
  Value changed_value;
};

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& options);
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  Result<std::string> render(const Program& program, const nlohmann::ordered_json& context);

  // ---- services for filters, tests, methods and globals (builtins.h) ----

  // Counts `units` steps against max_steps.
  Status charge(uint64_t units);
  // Charges for building a string or list of `bytes` and checks it against max_output_bytes.
  Status charge_size(size_t bytes);
  const RenderOptions& options() const { return opts_; }

  Result<Value> call(const Value& callee, CallArgs args);
  // obj.name and obj[key] with Jinja2's lookup order and undefined results.
  Result<Value> getattr(const Value& obj, std::string_view name);
  Result<Value> getitem(const Value& obj, const Value& key);
  // Python iter(): list/tuple items, dict keys, string code points; undefined is empty.
  Result<std::vector<Value>> iterate(const Value& v);
  Result<Namespace*> new_namespace();
  std::string strftime_now(std::string_view fmt) const;
  // Renders the body of a recursive loop again over `items` (loop(...)).
  Result<Value> recurse_loop(LoopState& state, const Value& items);

 private:
  enum class Flow : uint8_t { kNormal, kBreak, kContinue };

  Status check_stack() const;
  Error locate(Error e, Pos pos);
  Status write(std::string_view s);

  Result<Scope*> new_scope(Scope* parent);
  void release_scope(Scope* s);
  Value lookup(std::string_view name, const Scope* s) const;

  Result<Flow> exec_body(const Body& body, Scope* s);
  Result<Flow> exec(const Stmt& st, Scope* s);
  Result<Flow> exec_for(const ForStmt& f, Scope* s, const Value* items_override, int64_t depth0);
  Status assign(const Target& t, Value v, Scope* s);
  Result<std::string> capture(const Body& body, Scope* s);

  Status charge_work(const Value& v);
  Status charge_work(const CallArgs& args);
  Result<Value> eval(const Expr& e, Scope* s);
  Result<Value> eval_inner(const Expr& e, Scope* s);
  Result<CallArgs> eval_args(const ArgList& a, Scope* s);
  Result<Value> eval_filter_chain(const FilterExpr& f, Scope* s, const Value* input);
  Result<Value> eval_compare(const CompareExpr& c, Scope* s);
  Result<Value> eval_slice(const SliceExpr& e, Scope* s);
  Result<Value> call_macro(const Callable& c, CallArgs args);

  const RenderOptions& opts_;
  const char* stack_base_ = nullptr;
  uint64_t steps_ = 0;
  size_t call_depth_ = 0;
  bool located_ = false;  // the error in flight already names its position
  std::string* out_ = nullptr;

  std::deque<Scope> scopes_;
  std::vector<Scope*> free_scopes_;
  std::deque<Namespace> namespaces_;
};

}  // namespace cadenza::tmpl
