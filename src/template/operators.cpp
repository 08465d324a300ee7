#include "template/operators.h"

#include <cmath>

#include "template/format.h"
#include "template/interpreter.h"
#include "template/strings.h"

namespace cadenza::tmpl {
namespace {

std::string_view op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "+";
    case BinaryOp::kSub: return "-";
    case BinaryOp::kMul: return "*";
    case BinaryOp::kDiv: return "/";
    case BinaryOp::kFloorDiv: return "//";
    case BinaryOp::kMod: return "%";
    case BinaryOp::kPow: return "** or pow()";
    default: return "?";
  }
}

Error unsupported(BinaryOp op, const Value& a, const Value& b) {
  return make_error("TypeError: unsupported operand type(s) for {}: '{}' and '{}'", op_symbol(op), type_name(a), type_name(b));
}

Error overflow() { return Error("OverflowError: integer result does not fit in 64 bits"); }

int64_t as_i64(const Value& v) { return v.is_bool() ? int64_t{v.as_bool()} : v.as_int(); }
bool is_integral(const Value& v) { return v.is_int() || v.is_bool(); }

Result<Value> int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) return Error("ZeroDivisionError: 0.0 cannot be raised to a negative power");
    return Value::number(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1)
      if (__builtin_mul_overflow(result, base, &result)) return overflow();
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return overflow();
  }
  return Value::integer(result);
}

Result<Value> arith(BinaryOp op, const Value& a, const Value& b) {
  if (is_integral(a) && is_integral(b)) {
    const int64_t x = as_i64(a), y = as_i64(b);
    int64_t r = 0;
    switch (op) {
      case BinaryOp::kAdd:
        if (__builtin_add_overflow(x, y, &r)) return overflow();
        return Value::integer(r);
      case BinaryOp::kSub:
        if (__builtin_sub_overflow(x, y, &r)) return overflow();
        return Value::integer(r);
      case BinaryOp::kMul:
        if (__builtin_mul_overflow(x, y, &r)) return overflow();
        return Value::integer(r);
      case BinaryOp::kDiv:
        if (y == 0) return Error("ZeroDivisionError: division by zero");
        return Value::number(static_cast<double>(x) / static_cast<double>(y));
      case BinaryOp::kFloorDiv:
      case BinaryOp::kMod: {
        if (y == 0) return Error("ZeroDivisionError: integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) return op == BinaryOp::kMod ? Value::integer(0) : Result<Value>(overflow());
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) { --q; m += y; }  // Python floors
        return Value::integer(op == BinaryOp::kFloorDiv ? q : m);
      }
      case BinaryOp::kPow: return int_pow(x, y);
      default: break;
    }
  }
  const double x = a.to_double(), y = b.to_double();
  switch (op) {
    case BinaryOp::kAdd: return Value::number(x + y);
    case BinaryOp::kSub: return Value::number(x - y);
    case BinaryOp::kMul: return Value::number(x * y);
    case BinaryOp::kDiv:
      if (y == 0) return Error("ZeroDivisionError: float division by zero");
      return Value::number(x / y);
    case BinaryOp::kFloorDiv:
      if (y == 0) return Error("ZeroDivisionError: float floor division by zero");
      return Value::number(std::floor(x / y));
    case BinaryOp::kMod: {
      if (y == 0) return Error("ZeroDivisionError: float modulo");
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::number(m);
    }
    case BinaryOp::kPow:
      if (x == 0 && y < 0) return Error("ZeroDivisionError: 0.0 cannot be raised to a negative power");
      if (x < 0 && std::floor(y) != y) return Error("ValueError: negative number cannot be raised to a fractional power");
      return Value::number(std::pow(x, y));
    default: break;
  }
  return unsupported(op, a, b);
}

}  // namespace

Error undefined_error(const Value& v) {
  const std::string& hint = v.undefined_hint();
  if (hint.empty()) return Error("UndefinedError: value is undefined");
  return Error(hint);
}

Result<Value> binary_op(Interpreter& in, BinaryOp op, const Value& a, const Value& b) {
  if (op == BinaryOp::kConcat) {
    std::string s = to_str(a);
    s += to_str(b);
    if (auto c = in.charge_size(s.size()); !c) return c.error_value();
    return Value::string(std::move(s));
  }
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (a.is_number() && b.is_number()) return arith(op, a, b);
  if (op == BinaryOp::kAdd) {
    if (a.is_string() && b.is_string()) {
      if (auto c = in.charge_size(a.str().size() + b.str().size()); !c) return c.error_value();
      return Value::string(a.str() + b.str());
    }
    if (a.is_string())
      return make_error("TypeError: can only concatenate str (not \"{}\") to str", type_name(b));
    if (a.is_list() && b.is_list() && a.list().is_tuple == b.list().is_tuple) {
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      if (auto c = in.charge_size(items.size() * sizeof(Value)); !c) return c.error_value();
      return make_list(std::move(items), a.list().is_tuple);
    }
    if (a.is_list())
      return make_error("TypeError: can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b), type_name(a));
    return unsupported(op, a, b);
  }
  if (op == BinaryOp::kMul) {
    const Value* seq = nullptr;
    const Value* count = nullptr;
    if ((a.is_string() || a.is_list()) && is_integral(b)) { seq = &a; count = &b; }
    else if ((b.is_string() || b.is_list()) && is_integral(a)) { seq = &b; count = &a; }
    if (seq) {
      const int64_t n = std::max<int64_t>(0, as_i64(*count));
      if (seq->is_string()) {
        const size_t len = seq->str().size();
        if (len && static_cast<uint64_t>(n) > in.options().max_output_bytes / len + 1)
          return make_error("LimitError: repeating a string {} times exceeds the size limit", n);
        if (auto c = in.charge_size(len * static_cast<size_t>(n)); !c) return c.error_value();
        std::string out;
        out.reserve(len * static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) out += seq->str();
        return Value::string(std::move(out));
      }
      const size_t len = seq->list().items.size();
      if (len && static_cast<uint64_t>(n) > in.options().max_output_bytes / (len * sizeof(Value)) + 1)
        return make_error("LimitError: repeating a list {} times exceeds the size limit", n);
      if (auto c = in.charge_size(len * static_cast<size_t>(n) * sizeof(Value)); !c) return c.error_value();
      std::vector<Value> items;
      for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq->list().items.begin(), seq->list().items.end());
      return make_list(std::move(items), seq->list().is_tuple);
    }
    return unsupported(op, a, b);
  }
  if (op == BinaryOp::kMod && a.is_string()) {
    auto s = percent_format(a.str(), b);
    if (!s) return s.error_value();
    if (auto c = in.charge_size(s->size()); !c) return c.error_value();
    return Value::string(std::move(*s));
  }
  return unsupported(op, a, b);
}

Result<Value> unary_op(UnaryOp op, const Value& v) {
  if (v.is_undefined()) return undefined_error(v);
  if (op == UnaryOp::kNot) return Value::boolean(!truthy(v));
  if (is_integral(v)) {
    const int64_t x = as_i64(v);
    if (op == UnaryOp::kPos) return Value::integer(x);
    if (x == INT64_MIN) return overflow();
    return Value::integer(-x);
  }
  if (v.is_float()) return Value::number(op == UnaryOp::kPos ? v.as_float() : -v.as_float());
  return make_error("TypeError: bad operand type for unary {}: '{}'", op == UnaryOp::kNeg ? "-" : "+", type_name(v));
}

Result<int> py_compare(const Value& a, const Value& b) {
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) {
      const int64_t x = as_i64(a), y = as_i64(b);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const double x = a.to_double(), y = b.to_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order, which is Python's str order.
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.list().is_tuple == b.list().is_tuple) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (py_equal(x[i], y[i])) continue;
      return py_compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  return make_error("TypeError: '<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b));
}

Result<bool> contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;  // iterating an undefined yields nothing
    case Value::Kind::kString:
      if (!item.is_string())
        return make_error("TypeError: 'in <string>' requires string as left operand, not {}", type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
      // `in` advances an iterator; treat it as spent (Jinja2 gives the rest to a later pass).
      if (container.list().iterator_name) {
        if (container.list().consumed) return false;
        container.list().consumed = true;
      }
      for (const Value& v : container.list().items)
        if (py_equal(v, item)) return true;
      return false;
    case Value::Kind::kDict:
      if (item.is_list() || item.is_dict()) return make_error("TypeError: unhashable type: '{}'", type_name(item));
      return container.dict().find(item) != nullptr;
    default:
      return make_error("TypeError: argument of type '{}' is not iterable", type_name(container));
  }
}

Result<bool> compare_op(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq: return py_equal(a, b);
    case CompareOp::kNe: return !py_equal(a, b);
    case CompareOp::kIn: return contains(b, a);
    case CompareOp::kNotIn: {
      auto r = contains(b, a);
      if (!r) return r;
      return !*r;
    }
    default: break;
  }
  auto c = py_compare(a, b);
  if (!c) {
    const char* sym = op == CompareOp::kLt ? "<" : op == CompareOp::kLe ? "<=" : op == CompareOp::kGt ? ">" : ">=";
    std::string msg = c.error();
    if (const size_t p = msg.find("'<'"); p != std::string::npos) msg.replace(p, 3, fmt::format("'{}'", sym));
    return Error(std::move(msg));
  }
  switch (op) {
    case CompareOp::kLt: return *c < 0;
    case CompareOp::kLe: return *c <= 0;
    case CompareOp::kGt: return *c > 0;
    default: return *c >= 0;
  }
}

}  // namespace cadenza::tmpl
