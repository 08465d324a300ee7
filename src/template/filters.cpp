// Jinja2's built-in filters (jinja2/filters.py) with Hugging Face's tojson; argument names,
// defaults and quirks follow the originals (e.g. sort/unique/dictsort ignore case by default,
// int("4.7") is 4, items() of an undefined is empty, map/select/... return iterators).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "template/builtins.h"
#include "template/format.h"
#include "template/interpreter.h"
#include "template/operators.h"
#include "template/strings.h"
#include "template/try.h"

namespace cadenza::tmpl {
namespace {

using FilterFn = Result<Value> (*)(Interpreter& in, Value v, CallArgs args);

// Jinja2's soft_str: str(), with undefined as "".
std::string soft_str(const Value& v) { return to_str(v); }

Result<int64_t> to_int_arg(const Value& v, std::string_view what) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return int64_t{v.as_bool()};
  return make_error("TypeError: {} must be an integer, not {}", what, type_name(v));
}

Result<Value> str_result(Interpreter& in, std::string s) {
  TMPL_CHECK(in.charge_size(s.size()));
  return Value::string(std::move(s));
}

// Jinja2's make_attrgetter: "a.b.0" looks up item a, then b, then index 0.
Result<Value> get_path(Interpreter& in, Value item, const Value& attribute) {
  if (!attribute.is_string()) return in.getitem(item, attribute);
  for (const std::string& part : pystr::split(attribute.str(), std::string("."), -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    Value key = digits ? Value::integer(std::strtoll(part.c_str(), nullptr, 10)) : Value::string(part);
    TMPL_TRY(next, in.getitem(item, key));
    item = std::move(next);
  }
  return item;
}

// Sort keys of sort/dictsort/unique/min/max: strings lower-cased unless case_sensitive.
Value fold_case(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(pystr::lower(v.str()));
  return v;
}

// Stable sort by precomputed keys with Python ordering; the first comparison error wins.
Status sort_by_keys(std::vector<std::pair<Value, Value>>& entries, bool reverse) {
  Error err;
  bool failed = false;
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) {
    if (failed) return false;
    auto c = reverse ? py_compare(b.first, a.first) : py_compare(a.first, b.first);
    if (!c) {
      failed = true;
      err = c.error_value();
      return false;
    }
    return *c < 0;
  });
  if (failed) return err;
  return {};
}

Result<Value> f_abs(Interpreter&, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("abs", std::move(args), {}));
  if (v.is_int()) {
    if (v.as_int() == INT64_MIN) return Error("OverflowError: integer result does not fit in 64 bits");
    return Value::integer(std::llabs(v.as_int()));
  }
  if (v.is_bool()) return Value::integer(v.as_bool());
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  if (v.is_undefined()) return undefined_error(v);
  return make_error("TypeError: bad operand type for abs(): '{}'", type_name(v));
}

Result<Value> f_attr(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("attr", std::move(args), {"name"}, 1));
  if (!b[0].is_string()) return Error("TypeError: attribute name must be string");
  if (v.is_dict()) {  // attributes only: keys are not attributes
    if (auto m = find_method(v, b[0].str())) return *m;
    return Value::undefined(fmt::format("UndefinedError: 'dict object' has no attribute '{}'", b[0].str()));
  }
  return in.getattr(v, b[0].str());
}

Result<Value> f_batch(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("batch", std::move(args), {"linecount", "fill_with"}, 1));
  TMPL_TRY(n, to_int_arg(b[0], "linecount"));
  if (n <= 0) return Error("ValueError: batch size must be positive");
  TMPL_TRY(items, in.iterate(v));
  std::vector<Value> rows, row;
  for (Value& item : items) {
    if (static_cast<int64_t>(row.size()) == n) {
      TMPL_TRY(l, make_list(std::move(row)));
      rows.push_back(std::move(l));
      row.clear();
    }
    row.push_back(std::move(item));
  }
  if (!row.empty()) {
    if (b.has(1) && !b[1].is_none()) {
      TMPL_CHECK(in.charge_size(static_cast<size_t>(std::min<int64_t>(n, INT32_MAX)) * sizeof(Value)));
      while (static_cast<int64_t>(row.size()) < n) row.push_back(b[1]);
    }
    TMPL_TRY(l, make_list(std::move(row)));
    rows.push_back(std::move(l));
  }
  return make_iterator(std::move(rows));
}

Result<Value> f_slice(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("slice", std::move(args), {"slices", "fill_with"}, 1));
  TMPL_TRY(slices, to_int_arg(b[0], "slices"));
  if (slices <= 0 || slices > 100000) return Error("ValueError: slice count out of range");
  TMPL_TRY(seq, in.iterate(v));
  TMPL_CHECK(in.charge(static_cast<uint64_t>(slices)));
  const auto len = static_cast<int64_t>(seq.size());
  const int64_t per = len / slices, extra = len % slices;
  int64_t offset = 0;
  std::vector<Value> out;
  for (int64_t k = 0; k < slices; ++k) {
    const int64_t start = offset + k * per;
    if (k < extra) ++offset;
    const int64_t end = offset + (k + 1) * per;
    std::vector<Value> tmp(seq.begin() + start, seq.begin() + end);
    if (b.has(1) && !b[1].is_none() && k >= extra) tmp.push_back(b[1]);
    TMPL_TRY(l, make_list(std::move(tmp)));
    out.push_back(std::move(l));
  }
  return make_iterator(std::move(out));
}

Result<Value> f_capitalize(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("capitalize", std::move(args), {}));
  return str_result(in, pystr::capitalize(soft_str(v)));
}

Result<Value> f_center(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("center", std::move(args), {"width"}));
  TMPL_TRY(w, b.has(0) ? to_int_arg(b[0], "width") : Result<int64_t>(80));
  TMPL_CHECK(in.charge_size(static_cast<size_t>(std::max<int64_t>(w, 0))));
  return Value::string(pystr::pad(soft_str(v), w, ' ', 'c'));
}

Result<Value> f_default(Interpreter&, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("default", std::move(args), {"default_value", "boolean"}));
  const bool boolean = b.has(1) && truthy(b[1]);
  if (v.is_undefined() || (boolean && !truthy(v))) return b.has(0) ? b[0] : Value::string("");
  return v;
}

Result<Value> f_dictsort(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("dictsort", std::move(args), {"case_sensitive", "by", "reverse"}));
  if (!v.is_dict()) return Error("FilterArgumentError: dictsort expects a mapping");
  const bool cs = b.has(0) && truthy(b[0]);
  const std::string by = b.has(1) ? to_str(b[1]) : "key";
  if (by != "key" && by != "value") return Error("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
  TMPL_CHECK(in.charge(v.dict().items.size()));
  std::vector<std::pair<Value, Value>> entries;
  for (const auto& [k, val] : v.dict().items) {
    TMPL_TRY(pair, make_list({k, val}, true));
    entries.emplace_back(fold_case(by == "key" ? k : val, cs), std::move(pair));
  }
  TMPL_CHECK(sort_by_keys(entries, b.has(2) && truthy(b[2])));
  std::vector<Value> out;
  for (auto& [k, pair] : entries) out.push_back(std::move(pair));
  return make_list(std::move(out));
}

Result<Value> f_escape(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("escape", std::move(args), {}));
  std::string out;
  for (char c : soft_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return str_result(in, std::move(out));
}

Result<Value> f_first(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("first", std::move(args), {}));
  TMPL_TRY(items, in.iterate(v));
  if (items.empty()) return Value::undefined("UndefinedError: No first item, sequence was empty.");
  return items.front();
}

Result<Value> f_last(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("last", std::move(args), {}));
  TMPL_TRY(items, in.iterate(v));
  if (items.empty()) return Value::undefined("UndefinedError: No last item, sequence was empty.");
  return items.back();
}

// Python float(str): surrounding whitespace, sign, digits with underscores, inf/nan.
std::optional<double> parse_py_float(std::string_view s) {
  std::string t = pystr::strip(s, std::nullopt, true, true);
  std::string clean;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_') {
      if (i == 0 || i + 1 >= t.size() || !digit(t[i - 1]) || !digit(t[i + 1])) return std::nullopt;
      continue;
    }
    clean += t[i];
  }
  if (clean.empty()) return std::nullopt;
  std::string low = pystr::lower(clean);
  std::string_view body = low;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
  if (body == "inf" || body == "infinity" || body == "nan") return std::strtod(low.c_str(), nullptr);
  if (body.find_first_not_of("0123456789.e+-") != std::string_view::npos) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

// Python int(str, base).
std::optional<int64_t> parse_py_int(std::string_view s, int base) {
  std::string t = pystr::strip(s, std::nullopt, true, true);
  bool neg = false;
  size_t i = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  if (base == 16 && t.compare(i, 2, "0x") == 0) i += 2;
  std::string digits;
  for (; i < t.size(); ++i) {
    if (t[i] == '_' && !digits.empty() && i + 1 < t.size() && t[i + 1] != '_') continue;
    digits += t[i];
  }
  if (digits.empty()) return std::nullopt;
  int64_t v = 0;
  for (char c : digits) {
    const int d = (c >= '0' && c <= '9') ? c - '0' : ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ? (c | 0x20) - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return std::nullopt;
  }
  return neg ? -v : v;
}

Result<Value> f_float(Interpreter&, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("float", std::move(args), {"default"}));
  const Value dflt = b.has(0) ? b[0] : Value::number(0.0);
  if (v.is_number()) return Value::number(v.to_double());
  if (v.is_string())
    if (auto d = parse_py_float(v.str())) return Value::number(*d);
  return dflt;
}

Result<Value> f_int(Interpreter&, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("int", std::move(args), {"default", "base"}));
  const Value dflt = b.has(0) ? b[0] : Value::integer(0);
  TMPL_TRY(base, b.has(1) ? to_int_arg(b[1], "base") : Result<int64_t>(10));
  if (v.is_int()) return v;
  if (v.is_bool()) return Value::integer(v.as_bool());
  if (v.is_float()) {
    if (!std::isfinite(v.as_float())) return Error("OverflowError: cannot convert float infinity or NaN to integer");
    if (std::fabs(v.as_float()) >= 9.2e18) return Error("OverflowError: integer does not fit in 64 bits");
    return Value::integer(static_cast<int64_t>(v.as_float()));
  }
  if (v.is_string()) {
    if (base >= 2 && base <= 36)
      if (auto i = parse_py_int(v.str(), static_cast<int>(base))) return Value::integer(*i);
    if (auto d = parse_py_float(v.str())) {  // "42.23"|int is 42
      if (!std::isfinite(*d)) return Error("OverflowError: cannot convert float infinity or NaN to integer");
      if (std::fabs(*d) < 9.2e18) return Value::integer(static_cast<int64_t>(*d));
    }
  }
  return dflt;
}

Result<Value> f_indent(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("indent", std::move(args), {"width", "first", "blank"}));
  std::string indention;
  if (b.has(0) && b[0].is_string()) {
    indention = b[0].str();
  } else {
    TMPL_TRY(w, b.has(0) ? to_int_arg(b[0], "width") : Result<int64_t>(4));
    if (w > 0) indention.assign(static_cast<size_t>(std::min<int64_t>(w, 1 << 16)), ' ');
  }
  const bool first = b.has(1) && truthy(b[1]);
  const bool blank = b.has(2) && truthy(b[2]);
  std::string s = soft_str(v) + "\n";  // Jinja2's quirk so splitlines() sees a last empty line
  std::vector<std::string> lines = pystr::splitlines(s, false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + indention;
      rv += lines[i];
      TMPL_CHECK(in.charge_size(rv.size()));
    }
  } else if (!lines.empty()) {
    rv = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
      TMPL_CHECK(in.charge_size(rv.size()));
    }
  }
  if (first) rv = indention + rv;
  return str_result(in, std::move(rv));
}

Result<Value> f_items(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("items", std::move(args), {}));
  if (v.is_undefined()) return make_iterator({});
  if (!v.is_dict()) return Error("TypeError: Can only get item pairs from a mapping.");
  TMPL_CHECK(in.charge(v.dict().items.size()));
  std::vector<Value> out;
  for (const auto& [k, val] : v.dict().items) {
    TMPL_TRY(pair, make_list({k, val}, true));
    out.push_back(std::move(pair));
  }
  return make_iterator(std::move(out));
}

Result<Value> f_join(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("join", std::move(args), {"d", "attribute"}));
  const std::string sep = b.has(0) ? to_str(b[0]) : "";
  TMPL_TRY(items, in.iterate(v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    if (b.has(1) && !b[1].is_none()) {
      TMPL_TRY(x, get_path(in, items[i], b[1]));
      out += to_str(x);
    } else {
      out += to_str(items[i]);
    }
    TMPL_CHECK(in.charge_size(out.size()));
  }
  return Value::string(std::move(out));
}

Result<Value> f_length(Interpreter&, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("length", std::move(args), {}));
  switch (v.kind()) {
    case Value::Kind::kUndefined: return Value::integer(0);
    case Value::Kind::kString: return Value::integer(static_cast<int64_t>(pystr::length(v.str())));
    case Value::Kind::kList:
      if (v.is_iterator()) return make_error("TypeError: object of type '{}' has no len()", type_name(v));
      return Value::integer(static_cast<int64_t>(v.list().items.size()));
    case Value::Kind::kDict: return Value::integer(static_cast<int64_t>(v.dict().items.size()));
    case Value::Kind::kLoop: return Value::integer(static_cast<int64_t>(v.loop_state()->items.size()));
    default: return make_error("TypeError: object of type '{}' has no len()", type_name(v));
  }
}

Result<Value> f_list(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("list", std::move(args), {}));
  if (v.is_list() && !v.list().is_tuple) return v;
  TMPL_TRY(items, in.iterate(v));
  return make_list(std::move(items));
}

Result<Value> f_lower(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("lower", std::move(args), {}));
  return str_result(in, pystr::lower(soft_str(v)));
}

Result<Value> f_upper(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("upper", std::move(args), {}));
  return str_result(in, pystr::upper(soft_str(v)));
}

Result<Value> f_map(Interpreter& in, Value v, CallArgs args) {
  if (!truthy(v)) return make_iterator({});
  TMPL_TRY(items, in.iterate(v));
  std::vector<Value> out;
  if (args.pos.empty()) {
    TMPL_TRY(b, bind_args("map", std::move(args), {"attribute", "default"}));
    if (!b.has(0)) return Error("FilterArgumentError: map requires a filter name or attribute=");
    for (Value& item : items) {
      TMPL_TRY(x, get_path(in, item, b[0]));
      if (x.is_undefined() && b.has(1) && !b[1].is_none()) x = b[1];
      out.push_back(std::move(x));
    }
  } else {
    if (!args.pos[0].is_string()) return Error("FilterArgumentError: map filter name must be a string");
    const std::string name = args.pos[0].str();
    args.pos.erase(args.pos.begin());
    for (Value& item : items) {
      TMPL_TRY(x, apply_filter(in, name, std::move(item), args));
      out.push_back(std::move(x));
    }
  }
  return make_iterator(std::move(out));
}

Result<Value> min_max(Interpreter& in, Value v, CallArgs args, bool want_max) {
  TMPL_TRY(b, bind_args(want_max ? "max" : "min", std::move(args), {"case_sensitive", "attribute"}));
  const bool cs = b.has(0) && truthy(b[0]);
  TMPL_TRY(items, in.iterate(v));
  if (items.empty()) return Value::undefined("UndefinedError: No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    Value key = items[i];
    if (b.has(1) && !b[1].is_none()) {
      TMPL_TRY(x, get_path(in, items[i], b[1]));
      key = std::move(x);
    }
    key = fold_case(key, cs);
    if (i == 0) {
      best_key = std::move(key);
      continue;
    }
    TMPL_TRY(c, py_compare(key, best_key));
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Result<Value> f_max(Interpreter& in, Value v, CallArgs args) { return min_max(in, std::move(v), std::move(args), true); }
Result<Value> f_min(Interpreter& in, Value v, CallArgs args) { return min_max(in, std::move(v), std::move(args), false); }

Result<Value> f_pprint(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("pprint", std::move(args), {}));
  return str_result(in, to_repr(v));
}

// select / reject / selectattr / rejectattr.
Result<Value> select_impl(Interpreter& in, Value v, CallArgs args, bool keep_when, bool by_attr) {
  if (!truthy(v)) return make_iterator({});
  Value attribute;
  size_t off = 0;
  if (by_attr) {
    if (args.pos.empty()) return Error("FilterArgumentError: Missing parameter for attribute name");
    attribute = args.pos[0];
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (args.pos.size() > off) {
    if (!args.pos[off].is_string()) return Error("TypeError: test name must be a string");
    test = args.pos[off].str();
    test_args.pos.assign(args.pos.begin() + static_cast<ptrdiff_t>(off + 1), args.pos.end());
    test_args.kw = args.kw;
  }
  TMPL_TRY(items, in.iterate(v));
  std::vector<Value> out;
  for (Value& item : items) {
    Value subject = item;
    if (by_attr) {
      TMPL_TRY(x, get_path(in, item, attribute));
      subject = std::move(x);
    }
    bool ok;
    if (test) {
      TMPL_TRY(r, apply_test(in, *test, subject, test_args));
      ok = r;
    } else {
      ok = truthy(subject);
    }
    if (ok == keep_when) out.push_back(std::move(item));
  }
  return make_iterator(std::move(out));
}

Result<Value> f_select(Interpreter& in, Value v, CallArgs a) { return select_impl(in, std::move(v), std::move(a), true, false); }
Result<Value> f_reject(Interpreter& in, Value v, CallArgs a) { return select_impl(in, std::move(v), std::move(a), false, false); }
Result<Value> f_selectattr(Interpreter& in, Value v, CallArgs a) { return select_impl(in, std::move(v), std::move(a), true, true); }
Result<Value> f_rejectattr(Interpreter& in, Value v, CallArgs a) { return select_impl(in, std::move(v), std::move(a), false, true); }

Result<Value> f_replace(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("replace", std::move(args), {"old", "new", "count"}, 2));
  TMPL_TRY(count, b.has(2) && !b[2].is_none() ? to_int_arg(b[2], "count") : Result<int64_t>(-1));
  const std::string s = soft_str(v);
  const std::string old = to_str(b[0]), with = to_str(b[1]);
  // Bound the result before building it: each replacement grows the string by |new| - |old|.
  const auto n = static_cast<size_t>(pystr::count(s, old));
  if (with.size() > old.size() && n > 0 && (with.size() - old.size()) > in.options().max_output_bytes / n)
    return Error("LimitError: replace() result exceeds the size limit");
  return str_result(in, pystr::replace(s, old, with, count));
}

Result<Value> f_reverse(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("reverse", std::move(args), {}));
  if (v.is_string()) {
    std::u32string u = pystr::decode(v.str());
    std::reverse(u.begin(), u.end());
    return Value::string(pystr::encode(u));
  }
  // reversed() of a sequence is an iterator; other iterables become a reversed list.
  const char* kind = v.is_list() ? (v.list().is_tuple ? "reversed" : "list_reverseiterator")
                     : v.is_dict() ? "dict_reversekeyiterator" : v.is_undefined() ? "reversed" : nullptr;
  TMPL_TRY(items, in.iterate(v));
  std::reverse(items.begin(), items.end());
  if (kind) return make_iterator(std::move(items), kind);
  return make_list(std::move(items));
}

// Python's round(x, n): correctly rounded, ties to even; printf does the same on the exact value.
double py_round(double x, int64_t precision) {
  if (!std::isfinite(x)) return x;
  if (precision >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(precision, 300)), x);
    return std::strtod(buf, nullptr);
  }
  const double scale = std::pow(10.0, static_cast<double>(-precision));
  return std::nearbyint(x / scale) * scale;
}

Result<Value> f_round(Interpreter&, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("round", std::move(args), {"precision", "method"}));
  TMPL_TRY(precision, b.has(0) ? to_int_arg(b[0], "precision") : Result<int64_t>(0));
  const std::string method = b.has(1) ? to_str(b[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    return Error("FilterArgumentError: method must be common, ceil or floor");
  if (!v.is_number()) return make_error("TypeError: type {} doesn't define __round__ method", type_name(v));
  if (method == "common") {
    if (!v.is_float()) {  // round(int, n) stays an int; negative n rounds to tens, ties to even
      const int64_t x = v.is_bool() ? v.as_bool() : v.as_int();
      if (precision >= 0) return Value::integer(x);
      if (precision < -18) return Value::integer(0);
      int64_t m = 1;
      for (int64_t k = 0; k < -precision; ++k) m *= 10;
      int64_t q = x / m, r = x % m;
      if (r < 0) { --q; r += m; }
      if (2 * r > m || (2 * r == m && (q % 2) != 0)) ++q;
      int64_t out;
      if (__builtin_mul_overflow(q, m, &out)) return Error("OverflowError: integer result does not fit in 64 bits");
      return Value::integer(out);
    }
    return Value::number(py_round(v.as_float(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.to_double() * scale;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Result<Value> f_safe(Interpreter&, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("safe", std::move(args), {}));
  return Value::string(to_str(v));  // Markup(str(value)); autoescape is off, so plain text
}

Result<Value> f_sort(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("sort", std::move(args), {"reverse", "case_sensitive", "attribute"}));
  TMPL_TRY(items, in.iterate(v));
  const bool cs = b.has(1) && truthy(b[1]);
  std::vector<std::pair<Value, Value>> entries;
  for (Value& item : items) {
    Value key = item;
    if (b.has(2) && !b[2].is_none()) {
      // Jinja2 3.1: comma-separated attributes sort by a tuple of keys.
      std::vector<std::string> attrs = b[2].is_string() ? pystr::split(b[2].str(), std::string(","), -1)
                                                          : std::vector<std::string>{};
      if (attrs.size() > 1) {
        std::vector<Value> keys;
        for (const std::string& a : attrs) {
          TMPL_TRY(x, get_path(in, item, Value::string(pystr::strip(a, std::nullopt, true, true))));
          keys.push_back(fold_case(x, cs));
        }
        TMPL_TRY(tuple, make_list(std::move(keys), true));
        key = std::move(tuple);
      } else {
        TMPL_TRY(x, get_path(in, item, b[2]));
        key = fold_case(x, cs);
      }
    } else {
      key = fold_case(item, cs);
    }
    entries.emplace_back(std::move(key), std::move(item));
  }
  TMPL_CHECK(in.charge(entries.size() * 4));  // n log n comparisons, roughly
  TMPL_CHECK(sort_by_keys(entries, b.has(0) && truthy(b[0])));
  std::vector<Value> out;
  for (auto& [k, item] : entries) out.push_back(std::move(item));
  return make_list(std::move(out));
}

Result<Value> f_string(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("string", std::move(args), {}));
  if (v.is_string()) return v;
  return str_result(in, to_str(v));
}

Result<Value> f_striptags(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("striptags", std::move(args), {}));
  std::string s = soft_str(v), text;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') {
      const size_t close = s.find('>', i);
      if (close != std::string::npos) {
        i = close;
        text += ' ';
        continue;
      }
    }
    text += s[i];
  }
  std::string out;
  for (const std::string& w : pystr::split(text, std::nullopt, -1)) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return str_result(in, std::move(out));
}

Result<Value> f_sum(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("sum", std::move(args), {"attribute", "start"}));
  Value total = b.has(1) ? b[1] : Value::integer(0);
  TMPL_TRY(items, in.iterate(v));
  for (Value& item : items) {
    Value x = item;
    if (b.has(0) && !b[0].is_none()) {
      TMPL_TRY(got, get_path(in, item, b[0]));
      x = std::move(got);
    }
    TMPL_TRY(next, binary_op(in, BinaryOp::kAdd, total, x));
    total = std::move(next);
  }
  return total;
}

Result<Value> f_title(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("title", std::move(args), {}));
  return str_result(in, pystr::jinja_title(soft_str(v)));
}

// Hugging Face's override: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), which keeps non-ASCII text and uses Python's separators.
Result<Value> f_tojson(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("tojson", std::move(args), {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonOptions o;
  o.ensure_ascii = b.has(0) && truthy(b[0]);
  if (b.has(1) && !b[1].is_none()) {
    if (b[1].is_string()) {
      o.indent = b[1].str();
    } else {
      TMPL_TRY(n, to_int_arg(b[1], "indent"));
      o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(n, 0, 64)), ' ');
    }
  }
  if (b.has(2) && !b[2].is_none()) {
    if (!b[2].is_list() || b[2].list().items.size() != 2 || !b[2].list().items[0].is_string() ||
        !b[2].list().items[1].is_string())
      return Error("TypeError: separators must be a pair of strings");
    o.item_separator = b[2].list().items[0].str();
    o.key_separator = b[2].list().items[1].str();
  }
  o.sort_keys = b.has(3) && truthy(b[3]);
  TMPL_TRY(s, to_json(v, o));
  return str_result(in, std::move(s));
}

Result<Value> f_trim(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("trim", std::move(args), {"chars"}));
  std::optional<std::string> chars;
  if (b.has(0) && !b[0].is_none()) chars = to_str(b[0]);
  return str_result(in, pystr::strip(soft_str(v), chars, true, true));
}

Result<Value> f_truncate(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("truncate", std::move(args), {"length", "killwords", "end", "leeway"}));
  TMPL_TRY(length, b.has(0) ? to_int_arg(b[0], "length") : Result<int64_t>(255));
  const bool killwords = b.has(1) && truthy(b[1]);
  const std::string end = b.has(2) ? to_str(b[2]) : "...";
  TMPL_TRY(leeway, b.has(3) && !b[3].is_none() ? to_int_arg(b[3], "leeway") : Result<int64_t>(5));
  const auto end_len = static_cast<int64_t>(pystr::length(end));
  if (length < end_len || leeway < 0) return Error("AssertionError: truncate arguments out of range");
  std::u32string s = pystr::decode(soft_str(v));
  const auto size = static_cast<int64_t>(s.size());
  if (size <= length || size - length <= leeway) return Value::string(pystr::encode(s));
  std::string head = pystr::encode(s.substr(0, static_cast<size_t>(length - end_len)));
  if (killwords) return str_result(in, head + end);
  return str_result(in, pystr::rsplit(head, std::string(" "), 1)[0] + end);
}

Result<Value> f_unique(Interpreter& in, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("unique", std::move(args), {"case_sensitive", "attribute"}));
  const bool cs = b.has(0) && truthy(b[0]);
  TMPL_TRY(items, in.iterate(v));
  std::vector<Value> seen, out;
  for (Value& item : items) {
    Value key = item;
    if (b.has(1) && !b[1].is_none()) {
      TMPL_TRY(x, get_path(in, item, b[1]));
      key = std::move(x);
    }
    key = fold_case(key, cs);
    if ((key.is_list() && !key.list().is_tuple) || key.is_dict())
      return make_error("TypeError: unhashable type: '{}'", type_name(key));
    bool dup = false;
    for (const Value& s : seen) {
      if ((s.is_string() == key.is_string()) && py_equal(s, key)) {
        dup = true;
        break;
      }
    }
    TMPL_CHECK(in.charge(seen.size() / 16));
    if (dup) continue;
    seen.push_back(std::move(key));
    out.push_back(std::move(item));
  }
  return make_iterator(std::move(out));
}

Result<Value> f_wordcount(Interpreter&, Value v, CallArgs args) {
  TMPL_TRY(b, bind_args("wordcount", std::move(args), {}));
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : pystr::decode(soft_str(v))) {
    const bool w = pystr::is_word(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Result<Value> f_format(Interpreter& in, Value v, CallArgs args) {
  Value fmt_args;
  if (!args.kw.empty() && !args.pos.empty())
    return Error("FilterArgumentError: can't handle positional and keyword arguments at the same time");
  if (!args.kw.empty()) {
    std::vector<std::pair<Value, Value>> kw;
    for (auto& [k, x] : args.kw) kw.emplace_back(Value::string(k), std::move(x));
    TMPL_TRY(d, make_dict(std::move(kw)));
    fmt_args = std::move(d);
  } else {
    TMPL_TRY(t, make_list(std::move(args.pos), true));
    fmt_args = std::move(t);
  }
  TMPL_TRY(s, percent_format(soft_str(v), fmt_args));
  return str_result(in, std::move(s));
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},           {"attr", f_attr},           {"batch", f_batch},
    {"capitalize", f_capitalize}, {"center", f_center},   {"count", f_length},
    {"d", f_default},         {"default", f_default},     {"dictsort", f_dictsort},
    {"e", f_escape},          {"escape", f_escape},       {"first", f_first},
    {"float", f_float},       {"forceescape", f_escape},  {"format", f_format},
    {"indent", f_indent},     {"int", f_int},             {"items", f_items},
    {"join", f_join},         {"last", f_last},           {"length", f_length},
    {"list", f_list},         {"lower", f_lower},         {"map", f_map},
    {"max", f_max},           {"min", f_min},             {"pprint", f_pprint},
    {"reject", f_reject},     {"rejectattr", f_rejectattr}, {"replace", f_replace},
    {"reverse", f_reverse},   {"round", f_round},         {"safe", f_safe},
    {"select", f_select},     {"selectattr", f_selectattr}, {"slice", f_slice},
    {"sort", f_sort},         {"string", f_string},       {"striptags", f_striptags},
    {"sum", f_sum},           {"title", f_title},         {"tojson", f_tojson},
    {"trim", f_trim},         {"truncate", f_truncate},   {"unique", f_unique},
    {"upper", f_upper},       {"wordcount", f_wordcount},
};

}  // namespace

Result<Value> apply_filter(Interpreter& in, std::string_view name, Value operand, CallArgs args) {
  for (const FilterEntry& f : kFilters)
    if (f.name == name) return f.fn(in, std::move(operand), std::move(args));
  return make_error("TemplateRuntimeError: No filter named '{}'.", name);
}

}  // namespace cadenza::tmpl
