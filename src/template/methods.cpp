// Methods on values (Python's str, dict and list methods that Jinja2's immutable sandbox lets a
// template call; loop.cycle/loop.changed) and the global functions.
#include <algorithm>
#include <memory>

#include "template/builtins.h"
#include "template/format.h"
#include "template/interpreter.h"
#include "template/operators.h"
#include "template/strings.h"
#include "template/try.h"

namespace cadenza::tmpl {
namespace {

Result<std::optional<std::string>> opt_str(const BoundArgs& b, size_t i, std::string_view fn) {
  if (!b.has(i) || b[i].is_none()) return std::optional<std::string>();
  if (!b[i].is_string()) return make_error("TypeError: {}() argument must be str or None, not {}", fn, type_name(b[i]));
  return std::optional<std::string>(b[i].str());
}

Result<std::string> req_str(const Value& v, std::string_view fn) {
  if (!v.is_string()) return make_error("TypeError: {}() argument must be str, not {}", fn, type_name(v));
  return v.str();
}

Result<std::optional<int64_t>> opt_int(const BoundArgs& b, size_t i) {
  if (!b.has(i) || b[i].is_none()) return std::optional<int64_t>();
  if (b[i].is_int()) return std::optional<int64_t>(b[i].as_int());
  if (b[i].is_bool()) return std::optional<int64_t>(b[i].as_bool());
  return make_error("TypeError: '{}' object cannot be interpreted as an integer", type_name(b[i]));
}

Result<Value> string_list(Interpreter& in, std::vector<std::string> parts, bool tuple = false) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  TMPL_CHECK(in.charge(out.size()));
  return make_list(std::move(out), tuple);
}

// ---- str ----

Result<Value> strip_impl(const Value& self, CallArgs args, bool l, bool r, const char* fn) {
  TMPL_TRY(b, bind_args(fn, std::move(args), {"chars"}));
  TMPL_TRY(chars, opt_str(b, 0, fn));
  return Value::string(pystr::strip(self.str(), chars, l, r));
}
Result<Value> m_strip(Interpreter&, const Value& s, CallArgs a) { return strip_impl(s, std::move(a), true, true, "strip"); }
Result<Value> m_lstrip(Interpreter&, const Value& s, CallArgs a) { return strip_impl(s, std::move(a), true, false, "lstrip"); }
Result<Value> m_rstrip(Interpreter&, const Value& s, CallArgs a) { return strip_impl(s, std::move(a), false, true, "rstrip"); }

Result<Value> split_impl(Interpreter& in, const Value& self, CallArgs args, bool right) {
  const char* fn = right ? "rsplit" : "split";
  TMPL_TRY(b, bind_args(fn, std::move(args), {"sep", "maxsplit"}));
  TMPL_TRY(sep, opt_str(b, 0, fn));
  if (sep && sep->empty()) return Error("ValueError: empty separator");
  TMPL_TRY(maxsplit, opt_int(b, 1));
  const int64_t m = maxsplit.value_or(-1);
  return string_list(in, right ? pystr::rsplit(self.str(), sep, m) : pystr::split(self.str(), sep, m));
}
Result<Value> m_split(Interpreter& in, const Value& s, CallArgs a) { return split_impl(in, s, std::move(a), false); }
Result<Value> m_rsplit(Interpreter& in, const Value& s, CallArgs a) { return split_impl(in, s, std::move(a), true); }

Result<Value> m_splitlines(Interpreter& in, const Value& s, CallArgs a) {
  TMPL_TRY(b, bind_args("splitlines", std::move(a), {"keepends"}));
  return string_list(in, pystr::splitlines(s.str(), b.has(0) && truthy(b[0])));
}

Result<Value> affix_impl(const Value& self, CallArgs args, bool suffix) {
  const char* fn = suffix ? "endswith" : "startswith";
  TMPL_TRY(b, bind_args(fn, std::move(args), {"prefix", "start", "end"}, 1));
  TMPL_TRY(start, opt_int(b, 1));
  TMPL_TRY(end, opt_int(b, 2));
  std::string s = self.str();
  if (start || end) {
    std::u32string u = pystr::decode(s);
    const auto len = static_cast<int64_t>(u.size());
    auto clamp = [&](int64_t i) {
      if (i < 0) i += len;
      return std::clamp<int64_t>(i, 0, len);
    };
    const int64_t b0 = start ? clamp(*start) : 0, e0 = end ? clamp(*end) : len;
    s = b0 <= e0 ? pystr::encode(u.substr(static_cast<size_t>(b0), static_cast<size_t>(e0 - b0))) : std::string();
  }
  std::vector<std::string> options;
  if (b[0].is_string()) {
    options.push_back(b[0].str());
  } else if (b[0].is_list() && b[0].list().is_tuple) {
    for (const Value& o : b[0].list().items) {
      if (!o.is_string()) return make_error("TypeError: tuple for {} must only contain str, not {}", fn, type_name(o));
      options.push_back(o.str());
    }
  } else {
    return make_error("TypeError: {} first arg must be str or a tuple of str, not {}", fn, type_name(b[0]));
  }
  for (const std::string& o : options) {
    if (o.size() > s.size()) continue;
    if (suffix ? s.compare(s.size() - o.size(), o.size(), o) == 0 : s.compare(0, o.size(), o) == 0)
      return Value::boolean(true);
  }
  return Value::boolean(false);
}
Result<Value> m_startswith(Interpreter&, const Value& s, CallArgs a) { return affix_impl(s, std::move(a), false); }
Result<Value> m_endswith(Interpreter&, const Value& s, CallArgs a) { return affix_impl(s, std::move(a), true); }

Result<Value> m_replace(Interpreter& in, const Value& s, CallArgs a) {
  TMPL_TRY(b, bind_args("replace", std::move(a), {"old", "new", "count"}, 2));
  TMPL_TRY(old, req_str(b[0], "replace"));
  TMPL_TRY(with, req_str(b[1], "replace"));
  TMPL_TRY(count, opt_int(b, 2));
  const auto n = static_cast<size_t>(pystr::count(s.str(), old));
  if (with.size() > old.size() && n > 0 && (with.size() - old.size()) > in.options().max_output_bytes / n)
    return Error("LimitError: replace() result exceeds the size limit");
  std::string out = pystr::replace(s.str(), old, with, count.value_or(-1));
  TMPL_CHECK(in.charge_size(out.size()));
  return Value::string(std::move(out));
}

template <std::string (*Fn)(std::string_view)>
Result<Value> m_case(Interpreter&, const Value& s, CallArgs a) {
  TMPL_TRY(b, bind_args("method", std::move(a), {}));
  return Value::string(Fn(s.str()));
}

Result<Value> find_impl(const Value& self, CallArgs args, bool reverse, bool raise, const char* fn) {
  TMPL_TRY(b, bind_args(fn, std::move(args), {"sub", "start", "end"}, 1));
  TMPL_TRY(sub, req_str(b[0], fn));
  TMPL_TRY(start, opt_int(b, 1));
  TMPL_TRY(end, opt_int(b, 2));
  const int64_t r = pystr::find(self.str(), sub, start, end, reverse);
  if (r < 0 && raise) return Error("ValueError: substring not found");
  return Value::integer(r);
}
Result<Value> m_find(Interpreter&, const Value& s, CallArgs a) { return find_impl(s, std::move(a), false, false, "find"); }
Result<Value> m_rfind(Interpreter&, const Value& s, CallArgs a) { return find_impl(s, std::move(a), true, false, "rfind"); }
Result<Value> m_index(Interpreter&, const Value& s, CallArgs a) { return find_impl(s, std::move(a), false, true, "index"); }
Result<Value> m_rindex(Interpreter&, const Value& s, CallArgs a) { return find_impl(s, std::move(a), true, true, "rindex"); }

Result<Value> m_count(Interpreter&, const Value& s, CallArgs a) {
  TMPL_TRY(b, bind_args("count", std::move(a), {"sub"}, 1));
  TMPL_TRY(sub, req_str(b[0], "count"));
  return Value::integer(pystr::count(s.str(), sub));
}

Result<Value> m_join(Interpreter& in, const Value& s, CallArgs a) {
  TMPL_TRY(b, bind_args("join", std::move(a), {"iterable"}, 1));
  TMPL_TRY(items, in.iterate(b[0]));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string())
      return make_error("TypeError: sequence item {}: expected str instance, {} found", i, type_name(items[i]));
    if (i) out += s.str();
    out += items[i].str();
    TMPL_CHECK(in.charge_size(out.size()));
  }
  return Value::string(std::move(out));
}

Result<Value> pad_impl(Interpreter& in, const Value& s, CallArgs a, char how, const char* fn) {
  TMPL_TRY(b, bind_args(fn, std::move(a), {"width", "fillchar"}, 1));
  TMPL_TRY(width, opt_int(b, 0));
  char32_t fill = ' ';
  if (b.has(1)) {
    if (!b[1].is_string() || pystr::length(b[1].str()) != 1)
      return Error("TypeError: The fill character must be exactly one character long");
    fill = pystr::decode(b[1].str())[0];
  }
  TMPL_CHECK(in.charge_size(static_cast<size_t>(std::max<int64_t>(width.value_or(0), 0)) * 4));
  return Value::string(pystr::pad(s.str(), width.value_or(0), fill, how));
}
Result<Value> m_center(Interpreter& in, const Value& s, CallArgs a) { return pad_impl(in, s, std::move(a), 'c', "center"); }
Result<Value> m_ljust(Interpreter& in, const Value& s, CallArgs a) { return pad_impl(in, s, std::move(a), 'l', "ljust"); }
Result<Value> m_rjust(Interpreter& in, const Value& s, CallArgs a) { return pad_impl(in, s, std::move(a), 'r', "rjust"); }

Result<Value> m_zfill(Interpreter& in, const Value& s, CallArgs a) {
  TMPL_TRY(b, bind_args("zfill", std::move(a), {"width"}, 1));
  TMPL_TRY(width, opt_int(b, 0));
  const int64_t w = width.value_or(0);
  TMPL_CHECK(in.charge_size(static_cast<size_t>(std::max<int64_t>(w, 0))));
  std::string str = s.str();
  const auto len = static_cast<int64_t>(pystr::length(str));
  if (w <= len) return Value::string(str);
  const size_t sign = (!str.empty() && (str[0] == '-' || str[0] == '+')) ? 1 : 0;
  str.insert(sign, static_cast<size_t>(w - len), '0');
  return Value::string(std::move(str));
}

template <bool (*Pred)(char32_t)>
Result<Value> m_is(Interpreter&, const Value& s, CallArgs a) {
  TMPL_TRY(b, bind_args("method", std::move(a), {}));
  std::u32string u = pystr::decode(s.str());
  if (u.empty()) return Value::boolean(false);
  return Value::boolean(std::all_of(u.begin(), u.end(), Pred));
}
bool is_alnum(char32_t c) { return pystr::is_alpha(c) || pystr::is_digit(c); }

Result<Value> m_islower(Interpreter&, const Value& s, CallArgs) {
  bool cased = false;
  for (char32_t c : pystr::decode(s.str())) {
    if (pystr::is_upper(c)) return Value::boolean(false);
    cased = cased || pystr::is_lower(c);
  }
  return Value::boolean(cased);
}
Result<Value> m_isupper(Interpreter&, const Value& s, CallArgs) {
  bool cased = false;
  for (char32_t c : pystr::decode(s.str())) {
    if (pystr::is_lower(c)) return Value::boolean(false);
    cased = cased || pystr::is_upper(c);
  }
  return Value::boolean(cased);
}

Result<Value> partition_impl(Interpreter& in, const Value& s, CallArgs a, bool right) {
  TMPL_TRY(b, bind_args(right ? "rpartition" : "partition", std::move(a), {"sep"}, 1));
  TMPL_TRY(sep, req_str(b[0], "partition"));
  if (sep.empty()) return Error("ValueError: empty separator");
  const std::string& str = s.str();
  const size_t f = right ? str.rfind(sep) : str.find(sep);
  if (f == std::string::npos)
    return string_list(in, right ? std::vector<std::string>{"", "", str} : std::vector<std::string>{str, "", ""}, true);
  return string_list(in, {str.substr(0, f), sep, str.substr(f + sep.size())}, true);
}
Result<Value> m_partition(Interpreter& in, const Value& s, CallArgs a) { return partition_impl(in, s, std::move(a), false); }
Result<Value> m_rpartition(Interpreter& in, const Value& s, CallArgs a) { return partition_impl(in, s, std::move(a), true); }

Result<Value> m_removeprefix(Interpreter&, const Value& s, CallArgs a) {
  TMPL_TRY(b, bind_args("removeprefix", std::move(a), {"prefix"}, 1));
  TMPL_TRY(p, req_str(b[0], "removeprefix"));
  const std::string& str = s.str();
  if (str.compare(0, p.size(), p) == 0) return Value::string(str.substr(p.size()));
  return s;
}
Result<Value> m_removesuffix(Interpreter&, const Value& s, CallArgs a) {
  TMPL_TRY(b, bind_args("removesuffix", std::move(a), {"suffix"}, 1));
  TMPL_TRY(p, req_str(b[0], "removesuffix"));
  const std::string& str = s.str();
  if (!p.empty() && str.size() >= p.size() && str.compare(str.size() - p.size(), p.size(), p) == 0)
    return Value::string(str.substr(0, str.size() - p.size()));
  return s;
}

Result<Value> m_format(Interpreter& in, const Value& s, CallArgs a) {
  TMPL_TRY(out, brace_format(s.str(), a));
  TMPL_CHECK(in.charge_size(out.size()));
  return Value::string(std::move(out));
}

// ---- dict ----

Result<Value> m_get(Interpreter&, const Value& d, CallArgs a) {
  TMPL_TRY(b, bind_args("get", std::move(a), {"key", "default"}, 1));
  if ((b[0].is_list() && !b[0].list().is_tuple) || b[0].is_dict())
    return make_error("TypeError: unhashable type: '{}'", type_name(b[0]));
  if (const Value* v = d.dict().find(b[0])) return *v;
  return b.has(1) ? b[1] : Value::none();
}

Result<Value> m_items(Interpreter& in, const Value& d, CallArgs a) {
  TMPL_TRY(b, bind_args("items", std::move(a), {}));
  std::vector<Value> out;
  for (const auto& [k, v] : d.dict().items) {
    TMPL_TRY(pair, make_list({k, v}, true));
    out.push_back(std::move(pair));
  }
  TMPL_CHECK(in.charge(out.size()));
  return make_list(std::move(out));
}

Result<Value> m_keys(Interpreter& in, const Value& d, CallArgs a) {
  TMPL_TRY(b, bind_args("keys", std::move(a), {}));
  std::vector<Value> out;
  for (const auto& [k, v] : d.dict().items) out.push_back(k);
  TMPL_CHECK(in.charge(out.size()));
  return make_list(std::move(out));
}

Result<Value> m_values(Interpreter& in, const Value& d, CallArgs a) {
  TMPL_TRY(b, bind_args("values", std::move(a), {}));
  std::vector<Value> out;
  for (const auto& [k, v] : d.dict().items) out.push_back(v);
  TMPL_CHECK(in.charge(out.size()));
  return make_list(std::move(out));
}

Result<Value> m_copy(Interpreter&, const Value& self, CallArgs a) {
  TMPL_TRY(b, bind_args("copy", std::move(a), {}));
  return self;  // immutable: sharing is a copy
}

// ---- list ----

Result<Value> m_list_index(Interpreter&, const Value& l, CallArgs a) {
  TMPL_TRY(b, bind_args("index", std::move(a), {"value"}, 1));
  const auto& items = l.list().items;
  for (size_t i = 0; i < items.size(); ++i)
    if (py_equal(items[i], b[0])) return Value::integer(static_cast<int64_t>(i));
  return make_error("ValueError: {} is not in list", to_repr(b[0]));
}

Result<Value> m_list_count(Interpreter&, const Value& l, CallArgs a) {
  TMPL_TRY(b, bind_args("count", std::move(a), {"value"}, 1));
  int64_t n = 0;
  for (const Value& v : l.list().items) n += py_equal(v, b[0]) ? 1 : 0;
  return Value::integer(n);
}

// ---- loop ----

Result<Value> m_cycle(Interpreter&, const Value& loop, CallArgs a) {
  if (a.pos.empty()) return Error("TypeError: no items for cycling given");
  return a.pos[loop.loop_state()->index % a.pos.size()];
}

Result<Value> m_changed(Interpreter&, const Value& loop, CallArgs a) {
  LoopState* st = loop.loop_state();
  auto now = make_list(std::move(a.pos), true);
  if (!now) return now;
  if (st->has_changed_value && py_equal(st->changed_value, *now)) return Value::boolean(false);
  st->has_changed_value = true;
  st->changed_value = std::move(*now);
  return Value::boolean(true);
}

struct MethodEntry {
  std::string_view name;
  BuiltinFn fn;
};

constexpr MethodEntry kStrMethods[] = {
    {"strip", m_strip}, {"lstrip", m_lstrip}, {"rstrip", m_rstrip}, {"split", m_split}, {"rsplit", m_rsplit},
    {"splitlines", m_splitlines}, {"startswith", m_startswith}, {"endswith", m_endswith}, {"replace", m_replace},
    {"upper", m_case<pystr::upper>}, {"lower", m_case<pystr::lower>}, {"casefold", m_case<pystr::lower>},
    {"title", m_case<pystr::title>}, {"capitalize", m_case<pystr::capitalize>}, {"swapcase", m_case<pystr::swapcase>},
    {"find", m_find}, {"rfind", m_rfind}, {"index", m_index}, {"rindex", m_rindex}, {"count", m_count},
    {"join", m_join}, {"center", m_center}, {"ljust", m_ljust}, {"rjust", m_rjust}, {"zfill", m_zfill},
    {"isdigit", m_is<pystr::is_digit>}, {"isdecimal", m_is<pystr::is_digit>}, {"isnumeric", m_is<pystr::is_digit>},
    {"isalpha", m_is<pystr::is_alpha>}, {"isalnum", m_is<is_alnum>}, {"isspace", m_is<pystr::is_space>},
    {"islower", m_islower}, {"isupper", m_isupper}, {"partition", m_partition}, {"rpartition", m_rpartition},
    {"removeprefix", m_removeprefix}, {"removesuffix", m_removesuffix}, {"format", m_format},
};
constexpr MethodEntry kDictMethods[] = {
    {"get", m_get}, {"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"copy", m_copy},
};
constexpr MethodEntry kListMethods[] = {{"index", m_list_index}, {"count", m_list_count}, {"copy", m_copy}};
constexpr MethodEntry kLoopMethods[] = {{"cycle", m_cycle}, {"changed", m_changed}};

// What ImmutableSandboxedEnvironment refuses (modifies_known_mutable).
constexpr std::string_view kUnsafeDict[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kUnsafeList[] = {"append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove"};

Value bind_method(std::string_view name, BuiltinFn fn, const Value& self) {
  auto c = std::make_shared<Callable>();
  c->kind = Callable::Kind::kBuiltin;
  c->name = std::string(name);
  c->fn = fn;
  c->self = self;
  return Value::callable(std::move(c));
}

template <size_t N>
std::optional<Value> lookup(const MethodEntry (&table)[N], const Value& self, std::string_view name) {
  for (const MethodEntry& m : table)
    if (m.name == name) return bind_method(name, m.fn, self);
  return std::nullopt;
}

template <size_t N>
std::optional<Value> unsafe(const std::string_view (&names)[N], const Value& self, std::string_view name) {
  for (std::string_view n : names)
    if (n == name)
      return Value::undefined(
          fmt::format("SecurityError: access to attribute '{}' of '{}' object is unsafe.", name, type_name(self)));
  return std::nullopt;
}

// ---- globals ----

Result<Value> g_range(Interpreter& in, const Value&, CallArgs a) {
  if (!a.kw.empty()) return Error("TypeError: range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3)
    return make_error("TypeError: range expected 1 to 3 arguments, got {}", a.pos.size());
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < a.pos.size(); ++i) {
    if (!a.pos[i].is_int() && !a.pos[i].is_bool())
      return make_error("TypeError: '{}' object cannot be interpreted as an integer", type_name(a.pos[i]));
    v[a.pos.size() == 1 ? 1 : i] = a.pos[i].is_bool() ? a.pos[i].as_bool() : a.pos[i].as_int();
  }
  const int64_t start = v[0], stop = v[1], step = v[2];
  if (step == 0) return Error("ValueError: range() arg 3 must not be zero");
  // Jinja2's sandbox refuses ranges over MAX_RANGE items.
  constexpr long double kMaxRange = 100000;
  const long double count =
      step > 0 ? (stop > start ? (static_cast<long double>(stop) - start + step - 1) / step : 0)
               : (stop < start ? (static_cast<long double>(start) - stop - step - 1) / -static_cast<long double>(step) : 0);
  if (count > kMaxRange)
    return Error("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  // Every value lies between start and stop, so start + k * step cannot overflow.
  const auto n = static_cast<int64_t>(count);
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) out.push_back(Value::integer(start + k * step));
  TMPL_CHECK(in.charge(out.size()));
  return make_list(std::move(out));
}

Result<Value> g_dict(Interpreter& in, const Value&, CallArgs a) {
  std::vector<std::pair<Value, Value>> items;
  if (a.pos.size() > 1) return Error("TypeError: dict expected at most 1 argument");
  if (a.pos.size() == 1) {
    const Value& src = a.pos[0];
    if (src.is_dict()) {
      items = src.dict().items;
    } else {
      TMPL_TRY(seq, in.iterate(src));
      for (const Value& pair : seq) {
        TMPL_TRY(kv, in.iterate(pair));
        if (kv.size() != 2) return Error("ValueError: dictionary update sequence element has wrong length");
        items.emplace_back(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : a.kw) items.emplace_back(Value::string(k), std::move(v));
  TMPL_CHECK(in.charge(items.size()));
  return make_dict(std::move(items));
}

Result<Value> g_namespace(Interpreter& in, const Value&, CallArgs a) {
  TMPL_TRY(ns, in.new_namespace());
  if (a.pos.size() > 1) return Error("TypeError: namespace expected at most 1 positional argument");
  if (a.pos.size() == 1) {
    if (!a.pos[0].is_dict()) return Error("TypeError: namespace() argument must be a mapping");
    TMPL_CHECK(in.charge(a.pos[0].dict().items.size()));
    for (const auto& [k, v] : a.pos[0].dict().items) ns->set(to_str(k), v);
  }
  for (auto& [k, v] : a.kw) ns->set(k, std::move(v));
  return Value::ns(ns);
}

Result<Value> g_raise_exception(Interpreter&, const Value&, CallArgs a) {
  TMPL_TRY(b, bind_args("raise_exception", std::move(a), {"message"}, 1));
  return Error("TemplateError: " + to_str(b[0]));
}

Result<Value> g_strftime_now(Interpreter& in, const Value&, CallArgs a) {
  TMPL_TRY(b, bind_args("strftime_now", std::move(a), {"format"}, 1));
  TMPL_TRY(f, req_str(b[0], "strftime_now"));
  return Value::string(in.strftime_now(f));
}

// joiner(sep): "" on the first call, sep afterwards. Its state lives in a namespace the
// template cannot reach (held only as the callable's receiver).
Result<Value> joiner_call(Interpreter&, const Value& state, CallArgs) {
  Namespace* ns = state.ns();
  const Value* used = ns->find("used");
  const Value* sep = ns->find("sep");
  if (!used || !truthy(*used)) {
    ns->set("used", Value::boolean(true));
    return Value::string("");
  }
  return sep ? *sep : Value::string(", ");
}

Result<Value> g_joiner(Interpreter& in, const Value&, CallArgs a) {
  TMPL_TRY(b, bind_args("joiner", std::move(a), {"sep"}));
  TMPL_TRY(ns, in.new_namespace());
  ns->set("sep", b.has(0) ? b[0] : Value::string(", "));
  return bind_method("joiner", joiner_call, Value::ns(ns));
}

constexpr MethodEntry kGlobals[] = {
    {"range", g_range},   {"dict", g_dict},   {"namespace", g_namespace}, {"joiner", g_joiner},
    {"raise_exception", g_raise_exception},   {"strftime_now", g_strftime_now},
};

}  // namespace

std::optional<Value> find_method(const Value& v, std::string_view name) {
  switch (v.kind()) {
    case Value::Kind::kString: return lookup(kStrMethods, v, name);
    case Value::Kind::kDict:
      if (auto m = lookup(kDictMethods, v, name)) return m;
      return unsafe(kUnsafeDict, v, name);
    case Value::Kind::kList:
      if (v.is_iterator()) return std::nullopt;
      if (auto m = lookup(kListMethods, v, name)) return m;
      if (!v.list().is_tuple) return unsafe(kUnsafeList, v, name);
      return std::nullopt;
    case Value::Kind::kLoop: return lookup(kLoopMethods, v, name);
    default: return std::nullopt;
  }
}

std::optional<Value> find_global(std::string_view name) {
  // Builtins are stateless, so one shared callable per name serves every render and thread.
  static const std::vector<std::pair<std::string_view, Value>> globals = [] {
    std::vector<std::pair<std::string_view, Value>> g;
    for (const MethodEntry& e : kGlobals) g.emplace_back(e.name, bind_method(e.name, e.fn, Value()));
    return g;
  }();
  for (const auto& [n, v] : globals)
    if (n == name) return v;
  return std::nullopt;
}

}  // namespace cadenza::tmpl
