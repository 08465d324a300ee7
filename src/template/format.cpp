#include "template/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "template/interpreter.h"
#include "template/strings.h"

namespace cadenza::tmpl {
namespace {

// Namespaces are the only way to build cycles (ns.x = ns) or unbounded nesting; the printer
// shows a namespace it is already inside as {...}, like Python, and stops at kMaxValueDepth.
struct ReprState {
  std::vector<const Namespace*> active;
  uint32_t depth = 0;
};

void repr_into(std::string& out, const Value& v, ReprState& st);

void str_into(std::string& out, const Value& v, ReprState& st) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return;
    case Value::Kind::kString: out += v.str(); return;
    default: repr_into(out, v, st);
  }
}

void repr_into(std::string& out, const Value& v, ReprState& st) {
  if (st.depth > kMaxValueDepth) {
    out += "...";
    return;
  }
  switch (v.kind()) {
    case Value::Kind::kUndefined: out += "Undefined"; return;
    case Value::Kind::kNone: out += "None"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "True" : "False"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: out += pystr::float_repr(v.as_float()); return;
    case Value::Kind::kString: out += pystr::repr(v.str()); return;
    case Value::Kind::kList: {
      const List& l = v.list();
      if (l.iterator_name) {
        out += fmt::format("<{} object>", l.iterator_name);
        return;
      }
      out += l.is_tuple ? '(' : '[';
      ++st.depth;
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        repr_into(out, l.items[i], st);
      }
      --st.depth;
      if (l.is_tuple && l.items.size() == 1) out += ',';
      out += l.is_tuple ? ')' : ']';
      return;
    }
    case Value::Kind::kDict: {
      out += '{';
      ++st.depth;
      bool first = true;
      for (const auto& [k, val] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, k, st);
        out += ": ";
        repr_into(out, val, st);
      }
      --st.depth;
      out += '}';
      return;
    }
    case Value::Kind::kNamespace: {
      const Namespace* ns = v.ns();
      out += "<Namespace ";
      if (std::find(st.active.begin(), st.active.end(), ns) != st.active.end()) {
        out += "{...}>";
        return;
      }
      st.active.push_back(ns);
      ++st.depth;
      out += '{';
      bool first = true;
      for (const auto& [k, val] : ns->attrs) {
        if (!first) out += ", ";
        first = false;
        out += pystr::repr(k);
        out += ": ";
        repr_into(out, val, st);
      }
      out += "}>";
      --st.depth;
      st.active.pop_back();
      return;
    }
    case Value::Kind::kCallable: {
      const Callable& c = v.callable();
      if (c.kind == Callable::Kind::kMacro) out += fmt::format("<Macro '{}'>", c.name);
      else if (c.self.is_undefined()) out += fmt::format("<built-in function {}>", c.name);
      else out += fmt::format("<built-in method {} of {} object>", c.name, type_name(c.self));
      return;
    }
    case Value::Kind::kLoop: {
      const LoopState* l = v.loop_state();
      out += fmt::format("<LoopContext {}/{}>", l->index + 1, l->items.size());
      return;
    }
  }
}

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : pystr::decode(s)) {
    char buf[16];
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    // Lone surrogates (invalid input bytes) are escaped so the output stays valid UTF-8.
    const bool surrogate = c >= 0xD800 && c <= 0xDFFF;
    if (c < 0x20 || surrogate || (ensure_ascii && c > 0x7E)) {
      if (c > 0xFFFF) {
        const char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      }
      out += buf;
      continue;
    }
    pystr::append_utf8(out, c);
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return pystr::float_repr(d);
}

Result<std::string> json_key(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString: return k.str();
    case Value::Kind::kInt: return std::to_string(k.as_int());
    case Value::Kind::kFloat: return json_float(k.as_float());
    case Value::Kind::kBool: return std::string(k.as_bool() ? "true" : "false");
    case Value::Kind::kNone: return std::string("null");
    default: return make_error("TypeError: keys must be str, int, float, bool or None, not {}", type_name(k));
  }
}

struct JsonWriter {
  const JsonOptions& opts;
  std::string out;
  std::string item_sep;

  void newline(uint32_t level) {
    out += '\n';
    for (uint32_t i = 0; i < level; ++i) out += *opts.indent;
  }

  Status write(const Value& v, uint32_t level) {
    switch (v.kind()) {
      case Value::Kind::kNone: out += "null"; return {};
      case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return {};
      case Value::Kind::kInt: out += std::to_string(v.as_int()); return {};
      case Value::Kind::kFloat: out += json_float(v.as_float()); return {};
      case Value::Kind::kString: json_string(out, v.str(), opts.ensure_ascii); return {};
      case Value::Kind::kList: {
        if (v.is_iterator()) return make_error("TypeError: Object of type {} is not JSON serializable", type_name(v));
        const auto& items = v.list().items;
        if (items.empty()) { out += "[]"; return {}; }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (opts.indent) newline(level + 1);
          auto st = write(items[i], level + 1);
          if (!st) return st;
        }
        if (opts.indent) newline(level);
        out += ']';
        return {};
      }
      case Value::Kind::kDict: {
        const auto& items = v.dict().items;
        if (items.empty()) { out += "{}"; return {}; }
        std::vector<std::pair<std::string, const Value*>> entries;
        entries.reserve(items.size());
        for (const auto& [k, val] : items) {
          auto key = json_key(k);
          if (!key) return key.error_value();
          entries.emplace_back(std::move(*key), &val);
        }
        if (opts.sort_keys) {
          for (const auto& [k, val] : items)
            if (!k.is_string())
              return make_error("TypeError: '<' not supported between instances of '{}' and 'str'", type_name(k));
          std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out += item_sep;
          if (opts.indent) newline(level + 1);
          json_string(out, entries[i].first, opts.ensure_ascii);
          out += opts.key_separator;
          auto st = write(*entries[i].second, level + 1);
          if (!st) return st;
        }
        if (opts.indent) newline(level);
        out += '}';
        return {};
      }
      default:
        return make_error("TypeError: Object of type {} is not JSON serializable", type_name(v));
    }
  }
};

Result<Value> convert(const nlohmann::ordered_json& j, uint32_t depth) {
  if (depth > kMaxValueDepth) return make_error("ValueError: context nested deeper than {} levels", kMaxValueDepth);
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value::integer(static_cast<int64_t>(u));
      return Value::number(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) {
        auto v = convert(e, depth + 1);
        if (!v) return v;
        items.push_back(std::move(*v));
      }
      return make_list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      std::vector<std::pair<Value, Value>> items;
      items.reserve(j.size());
      for (const auto& [k, e] : j.items()) {
        auto v = convert(e, depth + 1);
        if (!v) return v;
        items.emplace_back(Value::string(k), std::move(*v));
      }
      return make_dict(std::move(items));
    }
    default: return Error("TypeError: the context holds a value JSON cannot express (binary or discarded)");
  }
}

}  // namespace

std::string to_str(const Value& v) {
  ReprState st;
  std::string out;
  str_into(out, v, st);
  return out;
}

std::string to_repr(const Value& v) {
  ReprState st;
  std::string out;
  repr_into(out, v, st);
  return out;
}

Result<std::string> to_json(const Value& v, const JsonOptions& opts) {
  JsonWriter w{opts, {}, opts.item_separator.value_or(opts.indent ? "," : ", ")};
  auto st = w.write(v, 0);
  if (!st) return st.error_value();
  return std::move(w.out);
}

Result<Value> from_json(const nlohmann::ordered_json& j) { return convert(j, 0); }

// ---- %-formatting ----

namespace {

struct Spec {
  std::string flags;
  int width = -1;
  int precision = -1;
  char conv = 0;
};

Result<std::string> format_one(const Spec& sp, const Value& arg) {
  char buf[512];
  std::string cfmt = "%" + sp.flags;
  if (sp.width >= 0) cfmt += std::to_string(std::min(sp.width, 400));
  if (sp.precision >= 0) cfmt += "." + std::to_string(std::min(sp.precision, 400));
  switch (sp.conv) {
    case 's': case 'r': case 'a': {
      std::string s = sp.conv == 's' ? to_str(arg) : to_repr(arg);
      if (sp.precision >= 0) {
        std::u32string u = pystr::decode(s);
        if (u.size() > static_cast<size_t>(sp.precision)) s = pystr::encode(u.substr(0, static_cast<size_t>(sp.precision)));
      }
      if (sp.width >= 0) s = pystr::pad(s, sp.width, ' ', sp.flags.find('-') != std::string::npos ? 'l' : 'r');
      return s;
    }
    case 'd': case 'i': case 'u': case 'x': case 'X': case 'o': {
      int64_t n;
      if (arg.is_int() || arg.is_bool()) n = arg.is_bool() ? arg.as_bool() : arg.as_int();
      else if (arg.is_float() && (sp.conv == 'd' || sp.conv == 'i' || sp.conv == 'u')) {
        if (!std::isfinite(arg.as_float())) return Error("OverflowError: cannot convert float infinity or NaN to integer");
        if (std::fabs(arg.as_float()) >= 9.2e18) return Error("OverflowError: integer does not fit in 64 bits");
        n = static_cast<int64_t>(arg.as_float());
      } else {
        return make_error("TypeError: %{} format: {} is required, not {}", sp.conv,
                          (sp.conv == 'x' || sp.conv == 'X' || sp.conv == 'o') ? "an integer" : "a real number", type_name(arg));
      }
      const char conv = sp.conv == 'i' || sp.conv == 'u' ? 'd' : sp.conv;
      std::snprintf(buf, sizeof buf, (cfmt + "ll" + conv).c_str(), static_cast<long long>(n));
      return std::string(buf);
    }
    case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': {
      if (!arg.is_number()) return make_error("TypeError: must be real number, not {}", type_name(arg));
      std::snprintf(buf, sizeof buf, (cfmt + sp.conv).c_str(), arg.to_double());
      return std::string(buf);
    }
    case 'c': {
      std::string s;
      if (arg.is_string() && pystr::length(arg.str()) == 1) s = arg.str();
      else if (arg.is_int() && arg.as_int() >= 0 && arg.as_int() <= 0x10FFFF) pystr::append_utf8(s, static_cast<char32_t>(arg.as_int()));
      else return Error("TypeError: %c requires an int or a unicode character");
      return s;
    }
    default: return make_error("ValueError: unsupported format character '{}'", sp.conv);
  }
}

}  // namespace

Result<std::string> percent_format(std::string_view fmt, const Value& args) {
  std::vector<Value> positional;
  const Dict* mapping = nullptr;
  if (args.is_list() && args.list().is_tuple) positional = args.list().items;
  else if (args.is_dict()) mapping = &args.dict();
  else positional.push_back(args);
  size_t next_arg = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') { out += fmt[i]; continue; }
    if (++i >= fmt.size()) return Error("ValueError: incomplete format");
    Spec sp;
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string_view::npos) return Error("ValueError: incomplete format key");
      if (!mapping) return Error("TypeError: format requires a mapping");
      arg = mapping->find(fmt.substr(i + 1, close - i - 1));
      if (!arg) return make_error("KeyError: '{}'", fmt.substr(i + 1, close - i - 1));
      used_mapping = true;
      i = close + 1;
    }
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) sp.flags += fmt[i++];
    auto number = [&](int* target) -> Status {
      if (i < fmt.size() && fmt[i] == '*') {
        if (next_arg >= positional.size() || !positional[next_arg].is_int()) return Error("TypeError: * wants int");
        *target = static_cast<int>(std::clamp<int64_t>(positional[next_arg++].as_int(), -400, 400));
        ++i;
        return {};
      }
      int n = -1;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') n = std::min((n < 0 ? 0 : n) * 10 + (fmt[i++] - '0'), 10000);
      if (n >= 0) *target = n;
      return {};
    };
    if (auto st = number(&sp.width); !st) return st.error_value();
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      sp.precision = 0;
      if (auto st = number(&sp.precision); !st) return st.error_value();
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) return Error("ValueError: incomplete format");
    sp.conv = fmt[i];
    if (sp.conv == '%') { out += '%'; continue; }
    if (!arg) {
      if (mapping && positional.empty()) return Error("TypeError: format requires a mapping");
      if (next_arg >= positional.size()) return Error("TypeError: not enough arguments for format string");
      arg = &positional[next_arg++];
    }
    auto s = format_one(sp, *arg);
    if (!s) return s.error_value();
    out += *s;
  }
  if (!mapping && next_arg < positional.size())
    return Error("TypeError: not all arguments converted during string formatting");
  (void)used_mapping;
  return out;
}

// ---- str.format ----

namespace {

Result<std::string> apply_format_spec(const Value& v, std::string_view spec) {
  if (spec.empty()) return to_str(v);
  size_t i = 0;
  char32_t fill = ' ';
  char align = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  std::u32string u = pystr::decode(spec);
  if (u.size() >= 2 && u[1] < 0x80 && is_align(static_cast<char>(u[1]))) {
    fill = u[0];
    align = static_cast<char>(u[1]);
    std::string first;
    pystr::append_utf8(first, u[0]);
    i = first.size() + 1;
  } else if (is_align(spec[0])) {
    align = spec[0];
    i = 1;
  }
  char sign = 0;
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  if (i < spec.size() && spec[i] == '#') ++i;
  if (i < spec.size() && spec[i] == '0' && !align) { fill = '0'; align = '='; ++i; }
  int width = 0, precision = -1;
  while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') width = std::min(width * 10 + (spec[i++] - '0'), 10000);
  bool thousands = false;
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) { thousands = true; ++i; }
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    precision = 0;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') precision = std::min(precision * 10 + (spec[i++] - '0'), 400);
  }
  char type = i < spec.size() ? spec[i++] : 0;
  if (i != spec.size() || thousands) return make_error("ValueError: unsupported format specifier '{}'", spec);
  std::string body;
  char buf[512];
  if (v.is_string() || type == 's') {
    if (type && type != 's') return make_error("ValueError: Unknown format code '{}' for object of type 'str'", type);
    body = to_str(v);
    if (precision >= 0) {
      std::u32string b = pystr::decode(body);
      if (b.size() > static_cast<size_t>(precision)) body = pystr::encode(b.substr(0, static_cast<size_t>(precision)));
    }
    if (!align) align = '<';
  } else if (v.is_number()) {
    const bool integral = !v.is_float();
    if (!type) type = integral ? 'd' : 'g';
    std::string cfmt = "%";
    if (sign == '+' || sign == ' ') cfmt += sign;
    if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b') {
      if (!integral) return make_error("ValueError: Unknown format code '{}' for object of type 'float'", type);
      const long long n = v.is_bool() ? v.as_bool() : v.as_int();
      if (type == 'b') {
        unsigned long long m = n < 0 ? static_cast<unsigned long long>(-(n + 1)) + 1 : static_cast<unsigned long long>(n);
        std::string bits;
        do { bits.insert(bits.begin(), static_cast<char>('0' + (m & 1))); m >>= 1; } while (m);
        body = (n < 0 ? "-" : sign == '+' ? "+" : "") + bits;
      } else {
        std::snprintf(buf, sizeof buf, (cfmt + "ll" + type).c_str(), n);
        body = buf;
      }
    } else if (std::string_view("eEfFgG%").find(type) != std::string_view::npos) {
      double d = v.to_double();
      if (type == '%') d *= 100;
      if (precision < 0) precision = 6;
      cfmt += "." + std::to_string(precision) + (type == '%' ? 'f' : type);
      std::snprintf(buf, sizeof buf, cfmt.c_str(), d);
      body = buf;
      if (type == '%') body += '%';
    } else {
      return make_error("ValueError: Unknown format code '{}' for object of type '{}'", type, type_name(v));
    }
    if (!align) align = '>';
  } else {
    body = to_str(v);
    if (!align) align = '<';
  }
  const auto len = static_cast<int64_t>(pystr::length(body));
  if (width <= len) return body;
  if (align == '=') {  // pad after the sign
    size_t sign_len = (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) ? 1 : 0;
    std::string pad_s;
    for (int64_t k = 0; k < width - len; ++k) pystr::append_utf8(pad_s, fill);
    return body.substr(0, sign_len) + pad_s + body.substr(sign_len);
  }
  return pystr::pad(body, width, fill, align == '<' ? 'l' : align == '>' ? 'r' : 'c');
}

}  // namespace

Result<std::string> brace_format(std::string_view fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') { out += '}'; ++i; continue; }
      return Error("ValueError: Single '}' encountered in format string");
    }
    if (c != '{') { out += c; continue; }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') { out += '{'; ++i; continue; }
    const size_t close = fmt.find('}', i);
    if (close == std::string_view::npos) return Error("ValueError: Single '{' encountered in format string");
    std::string_view field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string_view spec, conv;
    if (size_t colon = field.find(':'); colon != std::string_view::npos) { spec = field.substr(colon + 1); field = field.substr(0, colon); }
    if (size_t bang = field.find('!'); bang != std::string_view::npos) { conv = field.substr(bang + 1); field = field.substr(0, bang); }
    const Value* arg = nullptr;
    if (field.empty()) {
      if (auto_index >= args.pos.size()) return make_error("IndexError: Replacement index {} out of range for positional args tuple", auto_index);
      arg = &args.pos[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      const size_t idx = std::stoul(std::string(field.substr(0, 9)));
      if (idx >= args.pos.size()) return make_error("IndexError: Replacement index {} out of range for positional args tuple", idx);
      arg = &args.pos[idx];
    } else {
      for (const auto& [k, v] : args.kw)
        if (k == field) arg = &v;
      if (!arg) return make_error("KeyError: '{}'", field);
    }
    Value shown = *arg;
    if (conv == "r" || conv == "a") shown = Value::string(to_repr(*arg));
    else if (conv == "s") shown = Value::string(to_str(*arg));
    else if (!conv.empty()) return make_error("ValueError: Unknown conversion specifier {}", conv);
    auto s = apply_format_spec(shown, spec);
    if (!s) return s.error_value();
    out += *s;
  }
  return out;
}

}  // namespace cadenza::tmpl
