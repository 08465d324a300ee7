#include "grammar/json_grammar.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace cadenza {
namespace {

const char* suffix(JsonRule rule) {
  switch (rule) {
    case JsonRule::kWs: return "ws";
    case JsonRule::kChar: return "char";
    case JsonRule::kString: return "string";
    case JsonRule::kNumber: return "number";
    case JsonRule::kInteger: return "integer";
    case JsonRule::kBoolean: return "boolean";
    case JsonRule::kNull: return "null";
    case JsonRule::kValue: return "value";
    case JsonRule::kObject: return "object";
    case JsonRule::kArray: return "array";
  }
  return "";
}

unsigned bit(JsonRule r) { return 1u << static_cast<int>(r); }

std::string alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string s = "( ";
  for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
  return s + " )";
}

std::string digit_class(char a, char b) {
  if (a == b) return fmt::format("\"{}\"", a);
  return fmt::format("[{}-{}]", a, b);
}

// Decimal strings of one length n, from a to b (a <= b, no leading zeros unless n == 1).
std::string same_length_range(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  if (n == 0) return "";
  if (a == b) return fmt::format("\"{}\"", a);
  const std::string tail_a = a.substr(1), tail_b = b.substr(1);
  auto all = [](const std::string& s, char c) {
    return std::all_of(s.begin(), s.end(), [c](char x) { return x == c; });
  };
  auto seq = [](const std::string& head, const std::string& rest) {
    return rest.empty() ? head : head + " " + rest;
  };
  const std::string any_tail = n > 1 ? gbnf_repeat("[0-9]", n - 1, n - 1) : "";
  if (a[0] == b[0]) return seq(fmt::format("\"{}\"", a[0]), same_length_range(tail_a, tail_b));
  std::vector<std::string> alts;
  char mid_lo = static_cast<char>(a[0] + 1), mid_hi = static_cast<char>(b[0] - 1);
  if (all(tail_a, '0')) {
    mid_lo = a[0];
  } else {
    alts.push_back(seq(fmt::format("\"{}\"", a[0]),
                       same_length_range(tail_a, std::string(n - 1, '9'))));
  }
  const bool hi_full = all(tail_b, '9');
  if (hi_full) mid_hi = b[0];
  if (mid_lo <= mid_hi) alts.push_back(seq(digit_class(mid_lo, mid_hi), any_tail));
  if (!hi_full)
    alts.push_back(seq(fmt::format("\"{}\"", b[0]),
                       same_length_range(std::string(n - 1, '0'), tail_b)));
  return alternatives(alts);
}

// Non-negative integers in [lo, hi] (hi absent: unbounded, up to the digit limit).
std::vector<std::string> unsigned_range(uint64_t lo, std::optional<uint64_t> hi) {
  std::vector<std::string> alts;
  const std::string a = std::to_string(lo);
  const size_t max_digits = kJsonMaxIntegerDigits;
  const size_t last_len = hi ? std::to_string(*hi).size() : a.size();
  for (size_t len = a.size(); len <= last_len; ++len) {
    std::string from = a;
    if (len != a.size()) {
      from.assign(len, '0');
      from[0] = '1';
    }
    const std::string to = hi && len == last_len ? std::to_string(*hi) : std::string(len, '9');
    alts.push_back(same_length_range(from, to));
  }
  if (!hi && a.size() < max_digits)
    alts.push_back("[1-9] " + gbnf_repeat("[0-9]", a.size(), max_digits - 1));
  return alts;
}

}  // namespace

std::string json_integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {  // negative part: "-" then magnitudes
    const uint64_t min_mag = hi && *hi < 0 ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
    std::optional<uint64_t> max_mag;
    if (lo) max_mag = static_cast<uint64_t>(-(*lo + 1)) + 1;
    for (const std::string& m : unsigned_range(min_mag, max_mag)) alts.push_back("\"-\" " + m);
  }
  if (!hi || *hi >= 0) {
    const uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> to;
    if (hi) to = static_cast<uint64_t>(*hi);
    for (const std::string& m : unsigned_range(from, to)) alts.push_back(m);
  }
  return alternatives(alts);
}

std::string json_number_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  const std::string frac = fmt::format("( \".\" [0-9]{{1,{}}} )?", kJsonMaxFractionDigits);
  const std::string zeros = fmt::format("( \".\" \"0\"{{1,{}}} )?", kJsonMaxFractionDigits);
  // Magnitudes m with from <= m <= to (to absent: unbounded): an integer part below `to` with
  // any fraction, or `to` itself with only zeros after the point.
  auto magnitudes = [&](uint64_t from, std::optional<uint64_t> to) {
    std::vector<std::string> alts;
    if (!to || *to > from) {
      std::optional<uint64_t> below;
      if (to) below = *to - 1;
      alts.push_back(alternatives(unsigned_range(from, below)) + " " + frac);
    }
    if (to) alts.push_back(fmt::format("\"{}\" {}", *to, zeros));
    return alts;
  };
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {  // negative values: "-" then magnitudes up to -lo
    const uint64_t from = hi && *hi < 0 ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 0;
    std::optional<uint64_t> to;
    if (lo) to = static_cast<uint64_t>(-(*lo + 1)) + 1;
    for (const std::string& m : magnitudes(from, to)) alts.push_back("\"-\" " + m);
  }
  if (!hi || *hi >= 0) {
    const uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> to;
    if (hi) to = static_cast<uint64_t>(*hi);
    for (const std::string& m : magnitudes(from, to)) alts.push_back(m);
  }
  return alternatives(alts);
}

std::string json_rule_name(JsonRule rule, std::string_view prefix) {
  return fmt::format("{}{}", prefix, suffix(rule));
}

std::string json_rule_definition(JsonRule rule, std::string_view prefix) {
  auto n = [&](JsonRule r) { return json_rule_name(r, prefix); };
  const std::string name = n(rule);
  switch (rule) {
    case JsonRule::kWs:
      return fmt::format("{} ::= ( \" \" | \"\\n\" [ \\t]{{0,{}}} )?\n", name, kJsonMaxIndent);
    case JsonRule::kChar:
      return fmt::format(
          "{} ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{{4}} )\n",
          name);
    case JsonRule::kString:
      return fmt::format("{} ::= \"\\\"\" {}* \"\\\"\"\n", name, n(JsonRule::kChar));
    case JsonRule::kNumber:
      return fmt::format(
          "{} ::= \"-\"? ( \"0\" | [1-9] [0-9]{{0,{}}} ) ( \".\" [0-9]{{1,{}}} )? "
          "( [eE] [-+]? [0-9]{{1,{}}} )?\n",
          name, kJsonMaxIntegerDigits - 1, kJsonMaxFractionDigits, kJsonMaxExponentDigits);
    case JsonRule::kInteger:
      return fmt::format("{} ::= \"-\"? ( \"0\" | [1-9] [0-9]{{0,{}}} )\n", name,
                         kJsonMaxIntegerDigits - 1);
    case JsonRule::kBoolean:
      return fmt::format("{} ::= \"true\" | \"false\"\n", name);
    case JsonRule::kNull:
      return fmt::format("{} ::= \"null\"\n", name);
    case JsonRule::kValue:
      return fmt::format("{} ::= {} | {} | {} | {} | {} | {}\n", name, n(JsonRule::kObject),
                         n(JsonRule::kArray), n(JsonRule::kString), n(JsonRule::kNumber),
                         n(JsonRule::kBoolean), n(JsonRule::kNull));
    case JsonRule::kObject: {
      const std::string ws = n(JsonRule::kWs);
      const std::string member = fmt::format("{} {} \":\" {} {}", n(JsonRule::kString), ws, ws,
                                             n(JsonRule::kValue));
      return fmt::format("{} ::= \"{{\" {} ( {} ( {} \",\" {} {} )* {} )? \"}}\"\n", name, ws,
                         member, ws, ws, member, ws);
    }
    case JsonRule::kArray: {
      const std::string ws = n(JsonRule::kWs);
      const std::string v = n(JsonRule::kValue);
      return fmt::format("{} ::= \"[\" {} ( {} ( {} \",\" {} {} )* {} )? \"]\"\n", name, ws, v, ws,
                         ws, v, ws);
    }
  }
  return "";
}

unsigned json_rule_dependencies(JsonRule rule) {
  switch (rule) {
    case JsonRule::kString: return bit(rule) | bit(JsonRule::kChar);
    case JsonRule::kValue:
    case JsonRule::kObject:
    case JsonRule::kArray:
      return (1u << kJsonRuleCount) - 1;  // any value reaches every rule
    default: return bit(rule);
  }
}

std::string gbnf_repeat(const std::string& primary, uint64_t lo, std::optional<uint64_t> hi) {
  if (hi && *hi == lo) {
    if (lo == 1) return primary;
    return fmt::format("{}{{{}}}", primary, lo);
  }
  if (!hi) {
    if (lo == 0) return primary + "*";
    if (lo == 1) return primary + "+";
    return fmt::format("{}{{{},}}", primary, lo);
  }
  if (lo == 0 && *hi == 1) return primary + "?";
  return fmt::format("{}{{{},{}}}", primary, lo, *hi);
}

std::string json_format_body(std::string_view format) {
  const std::string hh = "( [01] [0-9] | \"2\" [0-3] )", mm = "[0-5] [0-9]";
  const std::string d31 = "( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )";
  const std::string d30 = "( \"0\" [1-9] | [12] [0-9] | \"30\" )";
  const std::string d29 = "( \"0\" [1-9] | [12] [0-9] )";
  const std::string date = "[0-9]{4} \"-\" ( \"0\" [13578] \"-\" " + d31 + " | \"1\" [02] \"-\" " +
                           d31 + " | \"0\" [469] \"-\" " + d30 + " | \"11-\" " + d30 +
                           " | \"02-\" " + d29 + " )";
  const std::string time = hh + " \":\" " + mm + " \":\" " + mm + " ( \".\" [0-9]{1,9} )? ( [zZ] | [-+] " +
                           hh + " \":\" " + mm + " )";
  const std::string atext = "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~\\x2d]";
  const std::string label = "[a-zA-Z0-9] ( [a-zA-Z0-9\\x2d]{0,61} [a-zA-Z0-9] )?";
  std::string body;
  if (format == "date") {
    body = date;
  } else if (format == "time") {
    body = time;
  } else if (format == "date-time") {
    body = date + " \"T\" " + time;
  } else if (format == "uuid") {
    const std::string h = "[0-9a-fA-F]";
    body = h + "{8} \"-\" " + h + "{4} \"-\" " + h + "{4} \"-\" " + h + "{4} \"-\" " + h + "{12}";
  } else if (format == "email") {
    body = atext + "+ ( \".\" " + atext + "+ )* \"@\" ( " + label + " \".\" )+ " + label;
  }
  if (body.empty()) return "";
  return "\"\\\"\" " + body + " \"\\\"\"";
}

std::string json_object_gbnf() {
  std::string out = "root ::= object\n";
  for (int i = 0; i < kJsonRuleCount; ++i) {
    const auto r = static_cast<JsonRule>(i);
    if (r == JsonRule::kInteger) continue;  // not used by the generic grammar
    out += json_rule_definition(r, "");
  }
  return out;
}

}  // namespace cadenza
