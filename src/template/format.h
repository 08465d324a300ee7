// Text forms of values: Python's str() and repr() (what `{{ x }}` prints), json.dumps as Hugging
// Face's tojson filter calls it, %-formatting and str.format; and the conversion of the JSON
// render context into values.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "template/value.h"
#include "util/result.h"

namespace cadenza::tmpl {

// Python str(v); Undefined prints as "".
std::string to_str(const Value& v);
// Python repr(v).
std::string to_repr(const Value& v);

// json.dumps(v, ensure_ascii=..., indent=..., separators=..., sort_keys=...).
struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // None: one line; "" or "  " etc.: pretty (indent=N gives N spaces)
  std::optional<std::string> item_separator;  // default ", " (one line) or "," (indented)
  std::string key_separator = ": ";
  bool sort_keys = false;
};
// Errors like Python's: "TypeError: Object of type Undefined is not JSON serializable".
Result<std::string> to_json(const Value& v, const JsonOptions& opts);

// The render context: objects become dicts (key order kept), arrays lists, numbers int or
// float. Errors for nesting deeper than kMaxValueDepth.
Result<Value> from_json(const nlohmann::ordered_json& j);

// Python's `fmt % args` for strings (the `%` operator and the |format filter).
Result<std::string> percent_format(std::string_view fmt, const Value& args);
// Python's str.format with positional/keyword fields, conversions (!r, !s) and format specs.
Result<std::string> brace_format(std::string_view fmt, const CallArgs& args);

}  // namespace cadenza::tmpl
