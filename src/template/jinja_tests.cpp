// Jinja2's built-in tests (`x is name`), as in jinja2/tests.py. Python's object model shows
// through: an undefined value is iterable, a sequence and callable; bools are numbers but not
// integers.
#include <cmath>

#include "template/builtins.h"
#include "template/format.h"
#include "template/operators.h"
#include "template/strings.h"

namespace cadenza::tmpl {
namespace {

Result<bool> parity(const Value& v, bool odd) {
  if (v.is_int() || v.is_bool()) {
    const int64_t x = v.is_bool() ? v.as_bool() : v.as_int();
    return ((x % 2) != 0) == odd;
  }
  if (v.is_float()) {
    double m = std::fmod(v.as_float(), 2.0);
    if (m < 0) m += 2.0;
    return odd ? m == 1.0 : m == 0.0;
  }
  if (v.is_undefined()) return undefined_error(v);
  return make_error("TypeError: unsupported operand type(s) for %: '{}' and 'int'", type_name(v));
}

bool same_object(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kList: return a.list_ptr() == b.list_ptr();
    case Value::Kind::kDict: return a.dict_ptr() == b.dict_ptr();
    case Value::Kind::kFloat: return false;  // float objects are never shared in Python
    default: return py_equal(a, b);
  }
}

bool has_case(const std::string& s, bool upper) {
  bool cased = false;
  for (char32_t c : pystr::decode(s)) {
    if (upper ? pystr::is_lower(c) : pystr::is_upper(c)) return false;
    if (upper ? pystr::is_upper(c) : pystr::is_lower(c)) cased = true;
  }
  return cased;
}

}  // namespace

Result<bool> apply_test(Interpreter& in, std::string_view name, const Value& v, CallArgs args) {
  (void)in;
  auto one_arg = [&](std::string_view test) -> Result<Value> {
    auto b = bind_args(test, std::move(args), {"other"}, 1);
    if (!b) return b.error_value();
    return (*b)[0];
  };
  auto no_args = [&]() -> Status {
    if (!args.pos.empty() || !args.kw.empty()) return make_error("TypeError: test '{}' takes no arguments", name);
    return {};
  };
  if (name == "defined" || name == "undefined") {
    if (auto st = no_args(); !st) return st.error_value();
    return v.is_undefined() == (name == "undefined");
  }
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable")
    return v.is_undefined() || v.is_string() || v.is_list() || v.is_iterator() || v.is_dict() || v.is_loop();
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "callable") return v.is_callable_value() || v.is_loop() || v.is_undefined();
  if (name == "escaped") return false;  // no Markup values: autoescape is off
  if (name == "odd" || name == "even") return parity(v, name == "odd");
  if (name == "lower" || name == "upper") {
    if (v.is_undefined()) return false;
    return has_case(to_str(v), name == "upper");  // str(value).islower()
  }
  if (name == "divisibleby") {
    auto other = one_arg("divisibleby");
    if (!other) return other.error_value();
    auto r = binary_op(in, BinaryOp::kMod, v, *other);
    if (!r) return r.error_value();
    return py_equal(*r, Value::integer(0));
  }
  if (name == "sameas") {
    auto other = one_arg("sameas");
    if (!other) return other.error_value();
    return same_object(v, *other);
  }
  if (name == "in") {
    auto other = one_arg("in");
    if (!other) return other.error_value();
    return contains(*other, v);
  }
  if (name == "filter") {
    if (!v.is_string()) return false;
    auto r = apply_filter(in, v.str(), Value(), {});
    return r.ok() || r.error().rfind("TemplateRuntimeError: No filter named", 0) != 0;
  }
  if (name == "test") {
    if (!v.is_string()) return false;
    static constexpr std::string_view kTests[] = {
        "defined", "undefined", "none", "boolean", "true", "false", "integer", "float", "number", "string",
        "mapping", "iterable", "sequence", "callable", "escaped", "odd", "even", "lower", "upper",
        "divisibleby", "sameas", "in", "filter", "test", "==", "eq", "equalto", "!=", "ne", "<", "lt",
        "lessthan", "<=", "le", ">", "gt", "greaterthan", ">=", "ge"};
    for (auto t : kTests)
      if (t == v.str()) return true;
    return false;
  }
  struct Cmp {
    std::string_view names[3];
    CompareOp op;
  };
  static constexpr Cmp kCmps[] = {
      {{"==", "eq", "equalto"}, CompareOp::kEq}, {{"!=", "ne", ""}, CompareOp::kNe},
      {{"<", "lt", "lessthan"}, CompareOp::kLt}, {{"<=", "le", ""}, CompareOp::kLe},
      {{">", "gt", "greaterthan"}, CompareOp::kGt}, {{">=", "ge", ""}, CompareOp::kGe},
  };
  for (const Cmp& c : kCmps) {
    for (auto n : c.names) {
      if (!n.empty() && n == name) {
        auto other = one_arg(name);
        if (!other) return other.error_value();
        return compare_op(c.op, v, *other);
      }
    }
  }
  return make_error("TemplateRuntimeError: No test named '{}'.", name);
}

}  // namespace cadenza::tmpl
