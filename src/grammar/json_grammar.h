// The generic JSON grammar in GBNF: the rules behind `response_format: {"type": "json_object"}`
// (json_object_gbnf) and the building blocks the JSON Schema converter reuses for its primitive
// types and for "any value" (json_schema_to_gbnf.h). See docs/structured-output.md.
//
// Whitespace policy (every grammar of this folder that produces JSON): between two tokens there is
// nothing, one space, or one newline followed by at most kMaxIndent spaces or tabs; never before
// the first token or after the last. Models otherwise can emit newlines without end; 40 columns
// fit a two-space pretty print 20 levels deep.
// Numbers: at most kMaxIntegerDigits digits before the point, kMaxFractionDigits after it and
// kMaxExponentDigits in the exponent (so a model cannot append digits forever, and every number is
// a finite double: parsers such as nlohmann::json reject 1e999, JSON.parse makes it Infinity). Strings: JSON
// escapes only (\" \\ \/ \b \f \n \r \t \uXXXX), no raw control characters (U+0000..U+001F).
// Rule names use only [a-zA-Z0-9-] (the portable GBNF rule-name alphabet).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cadenza {

inline constexpr int kJsonMaxIndent = 40;
inline constexpr int kJsonMaxIntegerDigits = 20;
inline constexpr int kJsonMaxFractionDigits = 20;
inline constexpr int kJsonMaxExponentDigits = 2;  // 20 digits e99 < 1e120: a finite double

// A complete grammar, root rule `root`, that accepts exactly one JSON object (any keys, any
// values, any nesting depth: the matcher's stack is the bound) under the policy above.
std::string json_object_gbnf();

// The primitive JSON rules, each named prefix + its suffix below, for grammars that embed JSON.
// json_rule_definition returns the full "name ::= body\n" line(s) of one rule; rules it refers to
// are other members of this enum (with the same prefix), which the caller emits too (see
// json_rule_dependencies).
enum class JsonRule {
  kWs,       // "ws": the bounded whitespace between tokens
  kChar,     // "char": one character of a string's body, escapes included
  kString,   // "string": a whole string, quotes included
  kNumber,   // "number"
  kInteger,  // "integer": -?(0|[1-9][0-9]*), bounded digits
  kBoolean,  // "boolean"
  kNull,     // "null"
  kValue,    // "value": any JSON value
  kObject,   // "object": any JSON object
  kArray,    // "array": any JSON array
};
inline constexpr int kJsonRuleCount = 10;

// The rule's name: prefix + "ws", "char", ...
std::string json_rule_name(JsonRule rule, std::string_view prefix);
// "name ::= body\n" for `rule`, names built with `prefix`.
std::string json_rule_definition(JsonRule rule, std::string_view prefix);
// Bitmask (1 << int(JsonRule)) of the rules `rule` refers to, directly or not, itself included.
unsigned json_rule_dependencies(JsonRule rule);

// A GBNF expression for the JSON integers in [lo, hi] (an absent bound: unbounded, within the
// digit limit), by digit-range decomposition; -0 and leading zeros excluded. lo <= hi.
std::string json_integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);

// A GBNF expression for the JSON numbers x with lo <= x <= hi (integer bounds; an absent bound:
// unbounded), written without exponent: an integer part in range with any fraction, or the bound
// itself with only zeros after the point ("-0.5" for [-1, 0], "1.000" for [0, 1]).
std::string json_number_range(std::optional<int64_t> lo, std::optional<int64_t> hi);

// The body of a rule for a JSON string (quotes included) of a `format`; "" for other formats.
//   date       YYYY-MM-DD, month 01-12, day within the month's length (February: 29, any year)
//   time       hh:mm:ss, optional fraction (1-9 digits), time zone Z, z or +hh:mm / -hh:mm
//              (RFC 3339 full-time; hours 00-23, no leap second 60)
//   date-time  date "T" time
//   uuid       8-4-4-4-12 hex digits, either case
//   email      the HTML / ajv-formats pattern: dot-separated atoms of letters, digits and
//              !#$%&'*+/=?^_`{|}~- before "@", then two or more dot-separated domain labels
//              (letters, digits, inner hyphens, at most 63 characters each)
std::string json_format_body(std::string_view format);

// `primary` repeated lo..hi times (hi absent: unbounded) in GBNF: x, x?, x*, x+, x{m}, x{m,},
// x{m,n}.
std::string gbnf_repeat(const std::string& primary, uint64_t lo, std::optional<uint64_t> hi);

}  // namespace cadenza
