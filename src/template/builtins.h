// The names templates can call: filters (`x | name`), tests (`x is name`), methods on strings,
// dicts and lists (`s.strip()`), and global functions (`range`, `namespace`, `raise_exception`).
// Each follows its Jinja2 / Python counterpart, including argument names and error wording.
#pragma once

#include <optional>
#include <string_view>

#include "template/value.h"
#include "util/result.h"

namespace cadenza::tmpl {

class Interpreter;

// Unknown names: "TemplateRuntimeError: No filter named 'x'." (Jinja2 reports these when run).
Result<Value> apply_filter(Interpreter& in, std::string_view name, Value operand, CallArgs args);
Result<bool> apply_test(Interpreter& in, std::string_view name, const Value& v, CallArgs args);

// A bound method of `v` (str, dict, list, loop): a callable; for the methods Jinja2's immutable
// sandbox forbids (list.append, dict.update, ...) an undefined that fails with a SecurityError
// when used; nullopt when `name` is no method of v's type.
std::optional<Value> find_method(const Value& v, std::string_view name);

// Globals: range, dict, namespace, joiner, cycler, lipsum-free Jinja2 set plus Hugging Face's
// raise_exception and strftime_now. nullopt for other names.
std::optional<Value> find_global(std::string_view name);

}  // namespace cadenza::tmpl
