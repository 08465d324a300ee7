#include "template/value.h"

#include <algorithm>
#include <cmath>

namespace cadenza::tmpl {

double Value::to_double() const {
  switch (kind()) {
    case Kind::kBool: return as_bool() ? 1.0 : 0.0;
    case Kind::kInt: return static_cast<double>(as_int());
    case Kind::kFloat: return as_float();
    default: return 0.0;
  }
}

uint32_t Value::depth() const {
  if (kind() == Kind::kList) return list().depth;
  if (is_dict()) return dict().depth;
  return 0;
}

namespace {

// Dicts at or above this size get a string-key hash index; smaller ones are scanned.
constexpr size_t kIndexThreshold = 12;

// Python dict key identity: numbers by value (1 == 1.0 == True), strings by content, None.
bool same_key(const Value& a, const Value& b) {
  if (a.is_string() || b.is_string()) return a.is_string() && b.is_string() && a.str() == b.str();
  return py_equal(a, b);
}

}  // namespace

const Value* Dict::find(std::string_view key) const {
  if (!string_index.empty()) {
    auto it = string_index.find(std::string(key));
    return it == string_index.end() ? nullptr : &items[it->second].second;
  }
  for (const auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : items)
    if (same_key(k, key)) return &v;
  return nullptr;
}

Result<Value> make_list(std::vector<Value> items, bool is_tuple) {
  auto l = std::make_shared<List>();
  uint32_t d = 0;
  for (const Value& v : items) d = std::max(d, v.depth());
  if (d + 1 > kMaxValueDepth) return make_error("ValueError: data nested deeper than {} levels", kMaxValueDepth);
  l->items = std::move(items);
  l->is_tuple = is_tuple;
  l->depth = d + 1;
  return Value::list(std::move(l));
}

Result<Value> make_iterator(std::vector<Value> items, const char* name) {
  auto v = make_list(std::move(items));
  if (!v) return v;
  auto it = std::make_shared<List>(v->list());
  it->iterator_name = name;
  return Value::list(std::move(it));
}

Result<Value> make_dict(std::vector<std::pair<Value, Value>> items) {
  auto d = std::make_shared<Dict>();
  uint32_t depth = 0;
  d->items.reserve(items.size());
  const bool index = items.size() >= kIndexThreshold;
  for (auto& [k, v] : items) {
    depth = std::max({depth, k.depth(), v.depth()});
    // Replace an existing key's value in place (first position wins, last value wins).
    Value* existing = nullptr;
    if (k.is_string() && index) {
      auto it = d->string_index.find(k.str());
      if (it != d->string_index.end()) existing = &d->items[it->second].second;
    } else {
      for (auto& [ek, ev] : d->items)
        if (same_key(ek, k)) { existing = &ev; break; }
    }
    if (existing) {
      *existing = std::move(v);
      continue;
    }
    if (k.is_string() && index) d->string_index.emplace(k.str(), d->items.size());
    d->items.emplace_back(std::move(k), std::move(v));
  }
  if (depth + 1 > kMaxValueDepth) return make_error("ValueError: data nested deeper than {} levels", kMaxValueDepth);
  d->depth = depth + 1;
  return Value::dict(std::move(d));
}

const Value* Namespace::find(std::string_view name) const {
  auto it = index.find(std::string(name));
  return it == index.end() ? nullptr : &attrs[it->second].second;
}

void Namespace::set(std::string_view name, Value v) {
  auto [it, inserted] = index.emplace(std::string(name), attrs.size());
  if (inserted) attrs.emplace_back(std::string(name), std::move(v));
  else attrs[it->second].second = std::move(v);
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return v.as_bool();
    case Value::Kind::kInt: return v.as_int() != 0;
    case Value::Kind::kFloat: return v.as_float() != 0.0;
    case Value::Kind::kString: return !v.str().empty();
    case Value::Kind::kList: return v.list().iterator_name || !v.list().items.empty();
    case Value::Kind::kDict: return !v.dict().items.empty();
    default: return true;
  }
}

bool py_equal(const Value& a, const Value& b, int depth) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
    const int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
    const int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
    return x == y;
  }
  if (a.kind() != b.kind()) return false;
  if (depth > static_cast<int>(kMaxValueDepth)) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.str() == b.str();
    case Value::Kind::kList: {
      const List& x = a.list();
      const List& y = b.list();
      if (x.iterator_name || y.iterator_name) return &x == &y;
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!py_equal(x.items[i], y.items[i], depth + 1)) return false;
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (!other || !py_equal(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace: return a.ns() == b.ns();
    case Value::Kind::kCallable: return &a.callable() == &b.callable();
    case Value::Kind::kLoop: return a.loop_state() == b.loop_state();
    default: return false;
  }
}

std::string_view type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList:
      if (v.list().iterator_name) return v.list().iterator_name;
      return v.list().is_tuple ? "tuple" : "list";
    case Value::Kind::kDict: return "dict";
    case Value::Kind::kNamespace: return "Namespace";
    case Value::Kind::kCallable:
      return v.callable().kind == Callable::Kind::kMacro ? "Macro" : "builtin_function_or_method";
    case Value::Kind::kLoop: return "LoopContext";
  }
  return "object";
}

std::string object_repr(const Value& v) {
  if (v.is_none()) return "'None'";
  return fmt::format("'{} object'", type_name(v));
}

Result<BoundArgs> bind_args(std::string_view fn_name, CallArgs args, std::initializer_list<std::string_view> names,
                            size_t required) {
  BoundArgs b;
  b.values.resize(names.size());
  b.given.assign(names.size(), false);
  if (args.pos.size() > names.size())
    return make_error("TypeError: {}() takes at most {} argument{} ({} given)", fn_name, names.size(),
                      names.size() == 1 ? "" : "s", args.pos.size());
  for (size_t i = 0; i < args.pos.size(); ++i) {
    b.values[i] = std::move(args.pos[i]);
    b.given[i] = true;
  }
  for (auto& [k, v] : args.kw) {
    size_t idx = 0;
    for (auto n : names) {
      if (n == k) break;
      ++idx;
    }
    if (idx == names.size())
      return make_error("TypeError: {}() got an unexpected keyword argument '{}'", fn_name, k);
    if (b.given[idx]) return make_error("TypeError: {}() got multiple values for argument '{}'", fn_name, k);
    b.values[idx] = std::move(v);
    b.given[idx] = true;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!b.given[i])
      return make_error("TypeError: {}() missing required argument '{}'", fn_name, *(names.begin() + i));
  }
  return b;
}

}  // namespace cadenza::tmpl
