// Attribute and item access with Jinja2's rules (the sandbox's getattr / getitem): `obj.name`
// tries Python attributes (methods) before dict keys, `obj[key]` tries items before attributes,
// and a miss is an undefined value that only fails when used. Also Python's iter().
#include "template/builtins.h"
#include "template/format.h"
#include "template/interpreter.h"
#include "template/operators.h"
#include "template/strings.h"
#include "template/try.h"

namespace cadenza::tmpl {
namespace {

Value missing_attr(const Value& obj, std::string_view name) {
  return Value::undefined(fmt::format("UndefinedError: {} has no attribute '{}'", object_repr(obj), name));
}

Value missing_item(const Value& obj, const Value& key) {
  if (key.is_string()) return missing_attr(obj, key.str());
  return Value::undefined(fmt::format("UndefinedError: {} has no element {}", object_repr(obj), to_repr(key)));
}

}  // namespace

Result<Value> Interpreter::getattr(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: return undefined_error(obj);
    case Value::Kind::kDict: {
      // Python attributes (methods) win over keys, as in Jinja2.
      if (auto m = find_method(obj, name)) return *m;
      if (const Value* v = obj.dict().find(name)) return *v;
      return missing_attr(obj, name);
    }
    case Value::Kind::kNamespace: {
      if (const Value* v = obj.ns()->find(name)) return *v;
      return missing_attr(obj, name);
    }
    case Value::Kind::kLoop: {
      const LoopState& st = *obj.loop_state();
      const auto n = static_cast<int64_t>(st.items.size());
      const auto i = static_cast<int64_t>(st.index);
      if (name == "index") return Value::integer(i + 1);
      if (name == "index0") return Value::integer(i);
      if (name == "revindex") return Value::integer(n - i);
      if (name == "revindex0") return Value::integer(n - i - 1);
      if (name == "first") return Value::boolean(i == 0);
      if (name == "last") return Value::boolean(i == n - 1);
      if (name == "length") return Value::integer(n);
      if (name == "depth") return Value::integer(st.depth0 + 1);
      if (name == "depth0") return Value::integer(st.depth0);
      if (name == "previtem")
        return i > 0 ? st.items[static_cast<size_t>(i - 1)] : Value::undefined("UndefinedError: there is no previous item");
      if (name == "nextitem")
        return i + 1 < n ? st.items[static_cast<size_t>(i + 1)] : Value::undefined("UndefinedError: there is no next item");
      if (auto m = find_method(obj, name)) return *m;
      return missing_attr(obj, name);
    }
    case Value::Kind::kCallable:
      if (name == "name") return Value::string(obj.callable().name);
      return missing_attr(obj, name);
    default:
      if (auto m = find_method(obj, name)) return *m;
      return missing_attr(obj, name);
  }
}

Result<Value> Interpreter::getitem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: return undefined_error(obj);
    case Value::Kind::kDict: {
      if (const Value* v = obj.dict().find(key)) return *v;
      break;
    }
    case Value::Kind::kList:
    case Value::Kind::kString: {
      if ((!key.is_int() && !key.is_bool()) || obj.is_iterator()) break;
      const int64_t i = key.is_bool() ? int64_t{key.as_bool()} : key.as_int();
      if (obj.is_list()) {
        const auto& items = obj.list().items;
        if (auto idx = pystr::normalize_index(i, items.size())) return items[*idx];
        return missing_item(obj, key);
      }
      const std::string& str = obj.str();
      if (pystr::is_ascii(str)) {
        if (auto idx = pystr::normalize_index(i, str.size())) return Value::string(std::string(1, str[*idx]));
        return missing_item(obj, key);
      }
      std::u32string u = pystr::decode(str);
      if (auto idx = pystr::normalize_index(i, u.size())) return Value::string(pystr::encode(u.substr(*idx, 1)));
      return missing_item(obj, key);
    }
    case Value::Kind::kNamespace:
      if (key.is_string()) {
        if (const Value* v = obj.ns()->find(key.str())) return *v;
      }
      return missing_item(obj, key);
    default: break;
  }
  // Jinja2 falls back to the attribute of the same name for string keys.
  if (key.is_string()) return getattr(obj, key.str());
  return missing_item(obj, key);
}

Result<std::vector<Value>> Interpreter::iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.kind()) {
    case Value::Kind::kUndefined: return out;
    case Value::Kind::kList:
      if (v.list().iterator_name) {  // a second pass over an iterator sees nothing
        if (v.list().consumed) return out;
        v.list().consumed = true;
      }
      out = v.list().items;
      break;
    case Value::Kind::kDict:
      out.reserve(v.dict().items.size());
      for (const auto& [k, val] : v.dict().items) out.push_back(k);
      break;
    case Value::Kind::kString: {
      const std::string& str = v.str();
      if (pystr::is_ascii(str)) {
        for (char c : str) out.push_back(Value::string(std::string(1, c)));
      } else {
        for (char32_t c : pystr::decode(str)) {
          std::string one;
          pystr::append_utf8(one, c);
          out.push_back(Value::string(std::move(one)));
        }
      }
      break;
    }
    case Value::Kind::kLoop: out = v.loop_state()->items; break;
    default: return Error(fmt::format("TypeError: '{}' object is not iterable", type_name(v)));
  }
  TMPL_CHECK(charge(out.size()));
  return out;
}

}  // namespace cadenza::tmpl
