// Value: the run-time data of the template interpreter, modelled on the Python objects Jinja2
// works with (see README.md in this folder for the mapping).
//
// Ownership: strings and numbers are held inline; lists and dicts are immutable and shared
// (shared_ptr<const ...>), so copying a Value is cheap and no reference cycle can form. Namespaces
// are mutable (ns.x = ns is legal), so they live in the interpreter's arena for the whole render
// and are referred to by raw pointer; a Value holding one never outlives the render, which only
// returns a string. Loop states are shared: what they hold was built before them, so they cannot
// reach themselves either.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "util/result.h"

namespace cadenza::tmpl {

class Value;
struct List;
struct Dict;
struct Namespace;
struct Callable;
struct LoopState;

using ListPtr = std::shared_ptr<const List>;
using DictPtr = std::shared_ptr<const Dict>;
using CallablePtr = std::shared_ptr<const Callable>;
// Loop states are mutable (loop.changed() remembers) and shared by the `loop` values handed out.
using LoopPtr = std::shared_ptr<LoopState>;

// Jinja2's Undefined. `hint` is the whole error an operation on it fails with, kind included:
// "UndefinedError: 'x' is undefined", or "SecurityError: ..." for a method the sandbox forbids.
struct Undefined {
  std::string hint;
};
struct NoneType {};

// Containers deeper than this cannot be built (input conversion, literals, filters), which keeps
// every recursive walk over values (printing, comparing, tojson, destruction) within a small
// stack.
inline constexpr uint32_t kMaxValueDepth = 200;

class Value {
 public:
  // Order matches the variant below.
  enum class Kind : uint8_t {
    kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable, kLoop
  };

  Value() : v_(Undefined{}) {}
  static Value undefined(std::string hint = {}) { return Value(Undefined{std::move(hint)}); }
  static Value none() { return Value(NoneType{}); }
  static Value boolean(bool b) { return Value(b); }
  static Value integer(int64_t i) { return Value(i); }
  static Value number(double d) { return Value(d); }
  static Value string(std::string s) { return Value(std::move(s)); }
  static Value list(ListPtr l) { return Value(std::move(l)); }
  static Value dict(DictPtr d) { return Value(std::move(d)); }
  static Value ns(Namespace* n) { return Value(n); }
  static Value callable(CallablePtr c) { return Value(std::move(c)); }
  static Value loop(LoopPtr l) { return Value(std::move(l)); }

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  // Python's numbers.Number: bool counts, as in Python.
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const;      // lists and tuples (not iterators)
  bool is_iterator() const;  // what Jinja2's lazy filters return (see List)
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_callable_value() const { return kind() == Kind::kCallable; }
  bool is_loop() const { return kind() == Kind::kLoop; }

  // Accessors: the kind must match (checked by the callers; asserts in debug builds).
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }
  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& str() const { return std::get<std::string>(v_); }
  const List& list() const { return *std::get<ListPtr>(v_); }
  const ListPtr& list_ptr() const { return std::get<ListPtr>(v_); }
  const Dict& dict() const { return *std::get<DictPtr>(v_); }
  const DictPtr& dict_ptr() const { return std::get<DictPtr>(v_); }
  Namespace* ns() const { return std::get<Namespace*>(v_); }
  const Callable& callable() const { return *std::get<CallablePtr>(v_); }
  LoopState* loop_state() const { return std::get<LoopPtr>(v_).get(); }

  // Numeric value of a bool/int/float (bool as 0/1).
  double to_double() const;
  // Nesting depth: 0 for scalars, 1 + deepest child for containers.
  uint32_t depth() const;

 private:
  explicit Value(Undefined u) : v_(std::move(u)) {}
  explicit Value(NoneType n) : v_(n) {}
  explicit Value(bool b) : v_(b) {}
  explicit Value(int64_t i) : v_(i) {}
  explicit Value(double d) : v_(d) {}
  explicit Value(std::string s) : v_(std::move(s)) {}
  explicit Value(ListPtr l) : v_(std::move(l)) {}
  explicit Value(DictPtr d) : v_(std::move(d)) {}
  explicit Value(Namespace* n) : v_(n) {}
  explicit Value(CallablePtr c) : v_(std::move(c)) {}
  explicit Value(LoopPtr l) : v_(std::move(l)) {}

  std::variant<Undefined, NoneType, bool, int64_t, double, std::string, ListPtr, DictPtr,
               Namespace*, CallablePtr, LoopPtr>
      v_;
};

// A Python list or tuple (tuples print with parentheses and never equal lists), or an iterator.
//
// Jinja2's map/select/reject/selectattr/rejectattr/unique/batch/slice/items filters return
// generators, and reverse a list_reverseiterator. Templates see the difference: an iterator is
// always true (even when empty), has no len() and no items by index, cannot be serialized, and a
// second pass over it yields nothing. `iterator_name` marks one ("generator", ...).
struct List {
  std::vector<Value> items;
  bool is_tuple = false;
  const char* iterator_name = nullptr;
  // Set by the first pass. Only the render that made the iterator can reach it, and a render
  // runs on one thread, so this needs no synchronisation.
  mutable bool consumed = false;
  uint32_t depth = 1;
};

inline bool Value::is_list() const { return kind() == Kind::kList && !list().iterator_name; }
inline bool Value::is_iterator() const { return kind() == Kind::kList && list().iterator_name; }

// A Python dict: insertion-ordered, keys compared the Python way (1 == 1.0 == True).
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  uint32_t depth = 1;
  // Index of string keys, built for larger dicts only (small ones are scanned).
  std::unordered_map<std::string, size_t> string_index;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
};

// Builds containers, enforcing kMaxValueDepth.
Result<Value> make_list(std::vector<Value> items, bool is_tuple = false);
// A Python iterator over `items` (see List).
Result<Value> make_iterator(std::vector<Value> items, const char* name = "generator");
// Later duplicates of a key replace the earlier value in place, as in a Python dict literal.
Result<Value> make_dict(std::vector<std::pair<Value, Value>> items);

// jinja2.utils.Namespace: the one mutable object templates can create. Indexed, because
// namespace(some_big_dict) can give it as many attributes as the request has keys.
struct Namespace {
  std::vector<std::pair<std::string, Value>> attrs;  // in assignment order (for printing)
  std::unordered_map<std::string, size_t> index;
  const Value* find(std::string_view name) const;
  void set(std::string_view name, Value v);
};

// Arguments of a call as evaluated: positional, then keyword in source order.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

// CallArgs bound to a Python-style signature (names in order). Unknown keywords, too many
// positionals, duplicates and missing required parameters are Errors worded like Python's.
struct BoundArgs {
  std::vector<Value> values;
  std::vector<bool> given;
  bool has(size_t i) const { return given[i]; }
  const Value& operator[](size_t i) const { return values[i]; }
};
Result<BoundArgs> bind_args(std::string_view fn_name, CallArgs args,
                            std::initializer_list<std::string_view> names, size_t required = 0);

class Interpreter;
struct MacroStmt;
struct Scope;

// Builtins and bound methods: `self` is the receiver (undefined for plain functions).
using BuiltinFn = Result<Value> (*)(Interpreter& in, const Value& self, CallArgs args);

// Something callable: a builtin function or bound method, or a macro (also `caller`).
struct Callable {
  enum class Kind : uint8_t { kBuiltin, kMacro };
  Kind kind = Kind::kBuiltin;
  std::string name;
  BuiltinFn fn = nullptr;   // kBuiltin
  Value self;               // kBuiltin: bound receiver
  const MacroStmt* macro = nullptr;  // kMacro: definition (lives in the Template's AST)
  Scope* closure = nullptr;          // kMacro: scope it was defined in (interpreter arena)
};

// Python semantics used throughout the interpreter.
bool truthy(const Value& v);
// Python ==. `depth` guards recursion through namespaces (the only possible cycles).
bool py_equal(const Value& a, const Value& b, int depth = 0);
// Python's type name for error messages: "str", "int", "NoneType", "list", ...
std::string_view type_name(const Value& v);
// Jinja2's object_type_repr for undefined-attribute messages: "'dict object'", "'None'".
std::string object_repr(const Value& v);

}  // namespace cadenza::tmpl
