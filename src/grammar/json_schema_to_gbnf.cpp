// The converter walks the schema once, returning for each subschema a GBNF expression (a rule
// name for objects, arrays and referenced schemas) and collecting rules in creation order.
// Integer ranges and the key-exclusion trie live in their own helpers below.
#include "grammar/json_schema_to_gbnf.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "grammar/json_grammar.h"
#include "grammar/regex_to_gbnf.h"

namespace cadenza {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int kMaxDepth = 128;  // nesting of subschemas (and of allOf / $ref merges)

std::string ptr_join(const std::string& base, std::string_view token) {
  std::string out = base + "/";
  for (const char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string show(const std::string& ptr) { return ptr.empty() ? "(root)" : ptr; }

Error err(const std::string& ptr, std::string_view what) {
  return make_error("{}: {}", show(ptr), what);
}

const std::set<std::string>& annotation_keywords() {
  static const std::set<std::string> k = {"description", "title",   "default",  "examples",
                                          "$schema",     "$id",     "$comment", "deprecated",
                                          "readOnly",    "writeOnly"};
  return k;
}

// Keywords by the type they constrain (used for validation and for inferring a missing `type`).
const std::map<std::string, std::string>& typed_keywords() {
  static const std::map<std::string, std::string> k = {
      {"minLength", "string"},         {"maxLength", "string"},
      {"pattern", "string"},           {"format", "string"},
      {"minimum", "number"},           {"maximum", "number"},
      {"exclusiveMinimum", "number"},  {"exclusiveMaximum", "number"},
      {"properties", "object"},        {"required", "object"},
      {"additionalProperties", "object"}, {"items", "array"},
      {"prefixItems", "array"},        {"minItems", "array"},
      {"maxItems", "array"},           {"uniqueItems", "array"}};
  return k;
}

const std::set<std::string>& general_keywords() {
  static const std::set<std::string> k = {"type",  "enum",  "const", "anyOf",       "oneOf",
                                          "allOf", "$ref",  "$defs", "definitions"};
  return k;
}

bool is_known(const std::string& key) {
  return annotation_keywords().count(key) || typed_keywords().count(key) ||
         general_keywords().count(key);
}

// Only annotations and definitions besides `except`.
bool only_annotations_besides(const ojson& s, std::string_view except) {
  for (const auto& [k, v] : s.items())
    if (k != except && !annotation_keywords().count(k) && k != "$defs" && k != "definitions")
      return false;
  return true;
}

std::string sanitize(std::string_view s) {
  std::string out;
  for (const char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (ok) {
      out += c;
    } else if (out.empty() || out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  while (!out.empty() && out.front() == '-') out.erase(out.begin());
  return out.substr(0, 48);
}

std::string alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string s = "( ";
  for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
  return s + " )";
}

std::string child_hint(const std::string& hint, const std::string& part) {
  const std::string p = sanitize(part);
  if (hint.empty()) return p.empty() ? "p" : p;
  return p.empty() ? hint : hint + "-" + p;
}

// Length of the UTF-8 sequence that starts with byte b (1 for stray bytes).
size_t utf8_length(unsigned char b) { return b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1; }

// The alternatives of many literals factored by common prefixes (whole code points), so that the
// matcher follows one path instead of one stack per value (an enum of thousands of values would
// otherwise exceed its stack limit).
std::string literal_trie(std::vector<std::string> texts) {
  std::sort(texts.begin(), texts.end());
  texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
  bool has_empty = false;
  std::vector<std::string> alts;
  for (size_t i = 0; i < texts.size();) {
    if (texts[i].empty()) {
      has_empty = true;
      ++i;
      continue;
    }
    const size_t unit = std::min(texts[i].size(), utf8_length(static_cast<unsigned char>(texts[i][0])));
    size_t j = i + 1;
    while (j < texts.size() && texts[j].compare(0, unit, texts[i], 0, unit) == 0) ++j;
    // The group [i, j) shares its first unit; extend the shared prefix as far as it goes.
    size_t common = unit;
    for (;;) {
      const std::string& first = texts[i];
      if (common >= first.size()) break;
      const size_t next = common + utf8_length(static_cast<unsigned char>(first[common]));
      bool all = next <= first.size();
      for (size_t k = i + 1; all && k < j; ++k)
        all = texts[k].size() >= next && texts[k].compare(0, next, first, 0, next) == 0;
      if (!all) break;
      common = next;
    }
    std::vector<std::string> rests;
    for (size_t k = i; k < j; ++k) rests.push_back(texts[k].substr(common));
    const std::string head = gbnf_literal(texts[i].substr(0, common));
    const bool only_empty = rests.size() == 1 && rests[0].empty();
    alts.push_back(only_empty ? head : head + " " + literal_trie(std::move(rests)));
    i = j;
  }
  if (alts.empty()) return "\"\"";
  const std::string body = alternatives(alts);
  if (!has_empty) return body;
  return alts.size() == 1 ? "( " + body + " )?" : body + "?";
}

// --- the converter ------------------------------------------------------------------------------

class Converter {
 public:
  Converter(const ojson& root, const SchemaGrammarOptions& opt) : root_(root), opt_(opt) {}

  Result<std::string> run() {
    const std::string root_name = opt_.rule_prefix + opt_.root_name;
    if (!opt_.rule_prefix.empty() && !is_gbnf_rule_name(opt_.rule_prefix))
      return make_error("rule_prefix '{}' may use only [a-zA-Z0-9-]", opt_.rule_prefix);
    if (!is_gbnf_rule_name(opt_.root_name))
      return make_error("root_name '{}' must be non-empty and use only [a-zA-Z0-9-]",
                        opt_.root_name);
    for (int i = 0; i < kJsonRuleCount; ++i)
      names_.insert(json_rule_name(static_cast<JsonRule>(i), opt_.rule_prefix));
    if (names_.count(root_name))
      return make_error("root_name '{}' collides with a JSON rule name", opt_.root_name);
    names_.insert(root_name);
    refs_[""] = root_name;
    auto e = visit(root_, "", "");
    if (!e) return e.error_value();
    std::string out = fmt::format("{} ::= {}\n", root_name, *e);
    for (const auto& [name, body] : rules_) {
      out += fmt::format("{} ::= {}\n", name, body);
      if (out.size() > opt_.max_output_bytes) break;
    }
    for (int i = 0; i < kJsonRuleCount; ++i)
      if (json_used_ & (1u << i)) out += json_rule_definition(static_cast<JsonRule>(i), opt_.rule_prefix);
    if (out.size() > opt_.max_output_bytes)
      return make_error("(root): the grammar exceeds max_output_bytes ({} bytes)",
                        opt_.max_output_bytes);
    return out;
  }

 private:
  std::string json(JsonRule r) {
    json_used_ |= json_rule_dependencies(r);
    return json_rule_name(r, opt_.rule_prefix);
  }

  std::string new_name(const std::string& hint) {
    std::string base = opt_.rule_prefix + (hint.empty() ? std::string("r") : hint);
    std::string name = base;
    for (int i = 2; names_.count(name); ++i) name = fmt::format("{}-{}", base, i);
    names_.insert(name);
    return name;
  }

  std::string add_rule(const std::string& hint, const std::string& body) {
    const std::string name = new_name(hint);
    rules_.emplace_back(name, body);
    return name;
  }

  // The rule of a named format, created once.
  std::string format_rule(const std::string& format);

  Result<std::string> visit(const ojson& s, const std::string& ptr, const std::string& hint);
  Result<std::string> visit_ref(const ojson& s, const std::string& ptr, const std::string& hint);
  Result<ojson> merge_all_of(const ojson& s, const std::string& ptr, int depth);
  Result<ojson> resolve(const std::string& ref, const std::string& ptr);
  Result<std::string> visit_type(const ojson& s, const std::string& type, const std::string& ptr,
                                 const std::string& hint);
  Result<std::string> visit_string(const ojson& s, const std::string& ptr);
  Result<std::string> visit_integer(const ojson& s, const std::string& ptr);
  Result<std::string> visit_number(const ojson& s, const std::string& ptr);
  Result<std::string> visit_object(const ojson& s, const std::string& ptr,
                                   const std::string& hint);
  Result<std::string> visit_array(const ojson& s, const std::string& ptr, const std::string& hint);
  std::string key_excluding(const std::vector<std::string>& names, const std::string& hint);

  const ojson& root_;
  const SchemaGrammarOptions& opt_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_;
  std::map<std::string, std::string> refs_;     // JSON pointer -> rule name
  std::map<std::string, std::string> formats_;  // format -> rule name
  unsigned json_used_ = 0;
  int depth_ = 0;
};

std::string Converter::format_rule(const std::string& format) {
  if (auto it = formats_.find(format); it != formats_.end()) return it->second;
  const std::string body = json_format_body(format);
  const std::string name = add_rule("format-" + format, body);
  formats_[format] = name;
  return name;
}

Result<ojson> Converter::resolve(const std::string& ref, const std::string& ptr) {
  if (ref.empty() || ref[0] != '#')
    return err(ptr, fmt::format("only local references (#...) are supported, not '{}'", ref));
  const std::string pointer = ref.substr(1);
  if (!pointer.empty() && pointer[0] != '/')
    return err(ptr, fmt::format("'{}' is not a JSON pointer reference", ref));
  try {
    const ojson::json_pointer jp(pointer);
    if (!root_.contains(jp)) return err(ptr, fmt::format("unresolvable reference '{}'", ref));
    return root_.at(jp);
  } catch (const nlohmann::json::exception&) {
    return err(ptr, fmt::format("bad reference '{}'", ref));
  }
}

// allOf (and $ref with sibling keywords): one schema with every part's keywords, when they agree.
Result<ojson> Converter::merge_all_of(const ojson& s, const std::string& ptr, int depth) {
  if (depth > kMaxDepth) return err(ptr, "allOf / $ref nesting too deep (recursive?)");
  ojson out = ojson::object();
  std::vector<std::pair<ojson, std::string>> parts;
  ojson self = s;
  if (self.contains("allOf")) {
    const ojson& all = self["allOf"];
    if (!all.is_array() || all.empty())
      return err(ptr_join(ptr, "allOf"), "must be a non-empty array");
    for (size_t i = 0; i < all.size(); ++i)
      parts.emplace_back(all[i], ptr_join(ptr_join(ptr, "allOf"), std::to_string(i)));
    self.erase("allOf");
  }
  if (self.contains("$ref")) {
    const std::string rptr = ptr_join(ptr, "$ref");
    if (!self["$ref"].is_string()) return err(rptr, "must be a string");
    auto target = resolve(self["$ref"].get<std::string>(), rptr);
    if (!target) return target.error_value();
    parts.emplace_back(*target, rptr);
    self.erase("$ref");
  }
  parts.insert(parts.begin(), {self, ptr});
  // additionalProperties of one part sees only that part's properties: merging is only sound
  // when no other part declares a property it forbids.
  std::vector<std::pair<std::set<std::string>, std::string>> closed;
  for (auto& [part, part_ptr] : parts) {
    if (part.is_boolean()) {
      if (part.get<bool>()) continue;
      return err(part_ptr, "the schema false matches nothing");
    }
    if (!part.is_object()) return err(part_ptr, "a schema must be an object or a boolean");
    ojson p = part;
    if (p.contains("allOf") || p.contains("$ref")) {
      auto m = merge_all_of(p, part_ptr, depth + 1);
      if (!m) return m.error_value();
      p = std::move(*m);
    }
    if (p.contains("additionalProperties") && p["additionalProperties"] != ojson(true)) {
      std::set<std::string> own;
      if (p.contains("properties") && p["properties"].is_object())
        for (const auto& [name, sub] : p["properties"].items()) own.insert(name);
      closed.emplace_back(std::move(own), ptr_join(part_ptr, "additionalProperties"));
    }
    for (auto& [k, v] : p.items()) {
      if (annotation_keywords().count(k) || k == "$defs" || k == "definitions") continue;
      if (!out.contains(k)) {
        out[k] = v;
      } else if (k == "required" && v.is_array() && out[k].is_array()) {
        for (const auto& r : v)
          if (std::find(out[k].begin(), out[k].end(), r) == out[k].end()) out[k].push_back(r);
      } else if (k == "properties" && v.is_object() && out[k].is_object()) {
        for (auto& [name, sub] : v.items()) {
          if (out[k].contains(name) && out[k][name] != sub)
            return err(ptr_join(ptr_join(part_ptr, k), name),
                       "allOf parts give this property different schemas (cannot merge)");
          out[k][name] = sub;
        }
      } else if (out[k] != v) {
        return err(ptr_join(part_ptr, k), "allOf parts disagree on this keyword (cannot merge)");
      }
    }
  }
  if (out.contains("properties") && out["properties"].is_object())
    for (const auto& [own, aptr] : closed)
      for (const auto& [name, sub] : out["properties"].items())
        if (!own.count(name))
          return err(aptr, fmt::format("forbids property '{}' that another allOf part declares "
                                       "(cannot merge)", name));
  return out;
}

Result<std::string> Converter::visit_ref(const ojson& s, const std::string& ptr,
                                         const std::string& hint) {
  const std::string rptr = ptr_join(ptr, "$ref");
  if (!s["$ref"].is_string()) return err(rptr, "must be a string");
  const std::string ref = s["$ref"].get<std::string>();
  auto target = resolve(ref, rptr);
  if (!target) return target.error_value();
  const std::string pointer = ref.substr(1);
  if (auto it = refs_.find(pointer); it != refs_.end()) return it->second;
  const size_t slash = pointer.rfind('/');
  std::string name_hint = sanitize(pointer.substr(slash == std::string::npos ? 0 : slash + 1));
  if (name_hint.empty()) name_hint = "ref";
  const std::string name = new_name(name_hint);
  refs_[pointer] = name;
  const size_t at = rules_.size();
  rules_.emplace_back(name, "");
  auto body = visit(*target, pointer, name_hint);
  if (!body) return body.error_value();
  rules_[at].second = *body;
  return name;
}

Result<std::string> Converter::visit(const ojson& s, const std::string& ptr,
                                     const std::string& hint) {
  if (s.is_boolean()) {
    if (s.get<bool>()) return json(JsonRule::kValue);
    return err(ptr, "the schema false matches nothing");
  }
  if (!s.is_object()) return err(ptr, "a schema must be an object or a boolean");
  if (depth_ > kMaxDepth) return err(ptr, "schema nested too deeply");
  struct DepthGuard {
    int& d;
    explicit DepthGuard(int& x) : d(x) { ++d; }
    ~DepthGuard() { --d; }
  } guard(depth_);

  for (const auto& [k, v] : s.items())
    if (!is_known(k)) return err(ptr_join(ptr, k), fmt::format("unsupported keyword '{}'", k));

  if (s.contains("allOf") || (s.contains("$ref") && !only_annotations_besides(s, "$ref"))) {
    auto merged = merge_all_of(s, ptr, 0);
    if (!merged) return merged.error_value();
    return visit(*merged, ptr, hint);
  }
  if (s.contains("$ref")) return visit_ref(s, ptr, hint);

  for (const char* kw : {"anyOf", "oneOf"}) {
    if (!s.contains(kw)) continue;
    const std::string kptr = ptr_join(ptr, kw);
    const ojson& list = s[kw];
    if (!list.is_array() || list.empty()) return err(kptr, "must be a non-empty array");
    for (const auto& [k, v] : s.items())
      if (k != kw && !annotation_keywords().count(k) && k != "$defs" && k != "definitions")
        return err(ptr_join(ptr, k), fmt::format("cannot be combined with {} (move it into "
                                                 "each alternative)", kw));
    std::vector<std::string> alts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto e = visit(list[i], ptr_join(kptr, std::to_string(i)),
                     child_hint(hint, fmt::format("alt{}", i)));
      if (!e) return e.error_value();
      alts.push_back(*e);
    }
    return alternatives(alts);
  }

  if (s.contains("const")) return gbnf_literal(s["const"].dump());
  if (s.contains("enum")) {
    const ojson& list = s["enum"];
    if (!list.is_array() || list.empty())
      return err(ptr_join(ptr, "enum"), "must be a non-empty array");
    std::vector<std::string> texts;
    for (const auto& v : list) texts.push_back(v.dump());
    return literal_trie(std::move(texts));
  }

  std::vector<std::string> types;
  if (s.contains("type")) {
    const ojson& t = s["type"];
    const std::string tptr = ptr_join(ptr, "type");
    static const std::set<std::string> valid = {"string", "number", "integer", "boolean",
                                                "null",   "object", "array"};
    auto add = [&](const ojson& v) -> Status {
      if (!v.is_string() || !valid.count(v.get<std::string>()))
        return err(tptr, fmt::format("unknown type {} (string, number, integer, boolean, null, "
                                     "object or array)", v.dump()));
      types.push_back(v.get<std::string>());
      return {};
    };
    if (t.is_array()) {
      if (t.empty()) return err(tptr, "must not be an empty array");
      for (const auto& v : t)
        if (auto st = add(v); !st) return st.error_value();
    } else if (auto st = add(t); !st) {
      return st.error_value();
    }
  } else {
    for (const auto& [k, v] : s.items()) {
      auto it = typed_keywords().find(k);
      if (it != typed_keywords().end() &&
          std::find(types.begin(), types.end(), it->second) == types.end())
        types.push_back(it->second);
    }
    if (types.empty()) return json(JsonRule::kValue);
  }
  std::vector<std::string> alts;
  for (const std::string& t : types) {
    auto e = visit_type(s, t, ptr, types.size() > 1 ? child_hint(hint, t) : hint);
    if (!e) return e.error_value();
    alts.push_back(*e);
  }
  return alternatives(alts);
}

Result<std::string> Converter::visit_type(const ojson& s, const std::string& type,
                                          const std::string& ptr, const std::string& hint) {
  if (type == "string") return visit_string(s, ptr);
  if (type == "integer") return visit_integer(s, ptr);
  if (type == "number") return visit_number(s, ptr);
  if (type == "boolean") return json(JsonRule::kBoolean);
  if (type == "null") return json(JsonRule::kNull);
  if (type == "object") return visit_object(s, ptr, hint);
  return visit_array(s, ptr, hint);
}

// A non-negative integer keyword, or nullopt when absent.
Result<std::optional<uint64_t>> count_keyword(const ojson& s, const char* kw,
                                              const std::string& ptr) {
  if (!s.contains(kw)) return std::optional<uint64_t>{};
  const ojson& v = s[kw];
  if (v.is_number_unsigned()) return std::optional<uint64_t>{v.get<uint64_t>()};
  if (v.is_number_integer() && v.get<int64_t>() >= 0)
    return std::optional<uint64_t>{static_cast<uint64_t>(v.get<int64_t>())};
  if (v.is_number_float() && v.get<double>() >= 0 && std::floor(v.get<double>()) == v.get<double>() &&
      v.get<double>() < 1e18)
    return std::optional<uint64_t>{static_cast<uint64_t>(v.get<double>())};
  return err(ptr_join(ptr, kw), "must be a non-negative integer");
}

Result<std::string> Converter::visit_string(const ojson& s, const std::string& ptr) {
  auto min_len = count_keyword(s, "minLength", ptr);
  if (!min_len) return min_len.error_value();
  auto max_len = count_keyword(s, "maxLength", ptr);
  if (!max_len) return max_len.error_value();
  const bool lengths = min_len->has_value() || max_len->has_value();
  const std::string quote = "\"\\\"\"";
  if (s.contains("format")) {
    const std::string fptr = ptr_join(ptr, "format");
    if (!s["format"].is_string()) return err(fptr, "must be a string");
    const std::string f = s["format"].get<std::string>();
    if (f != "date" && f != "time" && f != "date-time" && f != "uuid" && f != "email")
      return err(fptr, fmt::format("unsupported format '{}' (date, time, date-time, uuid, email)", f));
    if (lengths || s.contains("pattern"))
      return err(fptr, "cannot be combined with minLength, maxLength or pattern");
    return format_rule(f);
  }
  if (s.contains("pattern")) {
    const std::string pptr = ptr_join(ptr, "pattern");
    if (!s["pattern"].is_string()) return err(pptr, "must be a string");
    if (lengths) return err(pptr, "cannot be combined with minLength or maxLength");
    auto e = regex_to_gbnf_expression(s["pattern"].get<std::string>(), RegexTarget::kJsonStringBody);
    if (!e) return err(pptr, e.error());
    const std::string any = json(JsonRule::kChar) + "*";
    std::string body;
    if (!e->anchored_start) body += any + " ";
    if (!e->expr.empty()) body += "( " + e->expr + " ) ";
    if (!e->anchored_end && (e->anchored_start || !e->expr.empty())) body += any + " ";
    return "( " + quote + " " + body + quote + " )";
  }
  if (!lengths) return json(JsonRule::kString);
  const uint64_t lo = min_len->value_or(0);
  if (max_len->has_value() && **max_len < lo)
    return err(ptr_join(ptr, "maxLength"), "is below minLength");
  if (lo > 100000 || (max_len->has_value() && **max_len > 100000))
    return err(ptr_join(ptr, lo > 100000 ? "minLength" : "maxLength"), "above 100000 is not supported");
  return "( " + quote + " " + gbnf_repeat(json(JsonRule::kChar), lo, *max_len) + " " + quote + " )";
}

// An integer bound: minimum / exclusiveMinimum give the lowest allowed integer, maximum /
// exclusiveMaximum the highest; integer values are read exactly, others rounded inwards.
Result<std::optional<int64_t>> integer_bound(const ojson& s, const char* kw, const std::string& ptr) {
  if (!s.contains(kw)) return std::optional<int64_t>{};
  const ojson& v = s[kw];
  const std::string k = kw;
  const bool lower = k == "minimum" || k == "exclusiveMinimum";
  const bool exclusive = k.starts_with("exclusive");
  const std::string kptr = ptr_join(ptr, kw);
  if (!v.is_number()) return err(kptr, "must be a number");
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  int64_t x = 0;
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMax)) {
    return err(kptr, "outside the 64-bit integer range");
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
    if (exclusive) {
      if ((lower && x == kMax) || (!lower && x == kMin)) return err(kptr, "leaves no integer");
      x += lower ? 1 : -1;
    }
  } else {
    const double d = v.get<double>();
    if (!(std::fabs(d) < 9.2e18)) return err(kptr, "outside the 64-bit integer range");
    const double r = lower ? std::floor(d) + 1 : std::ceil(d) - 1;  // exclusive or fractional
    const double inclusive = lower ? std::ceil(d) : std::floor(d);
    x = static_cast<int64_t>(exclusive && inclusive == d ? r : inclusive);
  }
  return std::optional<int64_t>{x};
}

Result<std::string> Converter::visit_integer(const ojson& s, const std::string& ptr) {
  std::optional<int64_t> lo, hi;
  for (const char* kw : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    auto b = integer_bound(s, kw, ptr);
    if (!b) return b.error_value();
    if (!b->has_value()) continue;
    const std::string k = kw;
    if (k == "minimum" || k == "exclusiveMinimum") {
      lo = lo ? std::max(*lo, **b) : **b;
    } else {
      hi = hi ? std::min(*hi, **b) : **b;
    }
  }
  if (!lo && !hi) return json(JsonRule::kInteger);
  if (lo && hi && *lo > *hi) return err(ptr, "the integer range is empty (minimum above maximum)");
  return json_integer_range(lo, hi);
}

Result<std::string> Converter::visit_number(const ojson& s, const std::string& ptr) {
  for (const char* kw : {"exclusiveMinimum", "exclusiveMaximum"})
    if (s.contains(kw))
      return err(ptr_join(ptr, kw), "exclusive bounds on numbers are not supported (use minimum / "
                                    "maximum, or type integer)");
  std::optional<int64_t> lo, hi;
  for (const char* kw : {"minimum", "maximum"}) {
    if (!s.contains(kw)) continue;
    const ojson& v = s[kw];
    const bool integral = v.is_number_integer() ||
                          (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    if (!v.is_number() || !integral)
      return err(ptr_join(ptr, kw), "bounds on numbers must be integers (a fractional bound is "
                                    "not supported)");
    auto b = integer_bound(s, kw, ptr);
    if (!b) return b.error_value();
    (std::string(kw) == "minimum" ? lo : hi) = **b;
  }
  if (!lo && !hi) return json(JsonRule::kNumber);
  if (lo && hi && *lo > *hi) return err(ptr, "the number range is empty (minimum above maximum)");
  return json_number_range(lo, hi);
}


// A class character for the key trie (ASCII specials as \xHH, others as themselves).
std::string trie_class_char(const std::string& unit) {
  if (unit.size() == 1) {
    const auto c = static_cast<unsigned char>(unit[0]);
    if (c < 0x20 || c == '\\' || c == ']' || c == '[' || c == '-' || c == '^' || c == '"' || c == 0x7F)
      return fmt::format("\\x{:02x}", c);
  }
  return unit;
}

struct TrieNode {
  std::map<std::string, int> kids;  // unit (one character as written in JSON) -> node
  bool terminal = false;
};

// A key (quotes included) that is any JSON string but the given names: a trie of the names'
// JSON-escaped forms, where each node either ends (when it is not a name), continues along a
// child, or leaves the trie by a character no child has (then anything may follow).
std::string Converter::key_excluding(const std::vector<std::string>& names,
                                     const std::string& hint) {
  std::vector<TrieNode> nodes(1);
  for (const std::string& n : names) {
    const std::string body = ojson(n).dump();
    int at = 0;
    for (size_t i = 1; i + 1 < body.size();) {
      size_t len = 1;
      const auto b = static_cast<unsigned char>(body[i]);
      if (body[i] == '\\') {
        len = body[i + 1] == 'u' ? 6 : 2;
      } else if (b >= 0xF0) {
        len = 4;
      } else if (b >= 0xE0) {
        len = 3;
      } else if (b >= 0xC0) {
        len = 2;
      }
      const std::string unit = body.substr(i, len);
      i += len;
      auto it = nodes[at].kids.find(unit);
      if (it == nodes[at].kids.end()) {
        nodes.emplace_back();
        const int id = static_cast<int>(nodes.size()) - 1;
        nodes[at].kids[unit] = id;
        at = id;
      } else {
        at = it->second;
      }
    }
    nodes[at].terminal = true;
  }
  const std::string ch = json(JsonRule::kChar);
  std::vector<std::string> rule(nodes.size());
  // Children have larger ids than their parents: build from the last node up.
  for (int id = static_cast<int>(nodes.size()) - 1; id >= 0; --id) {
    const TrieNode& node = nodes[id];
    std::vector<std::string> alts;
    std::string plain_excluded;
    bool escape_child = false;
    for (const auto& [unit, kid] : node.kids) {
      alts.push_back(gbnf_literal(unit) + " " + rule[kid]);
      if (unit[0] == '\\') {
        escape_child = true;
      } else {
        plain_excluded += trie_class_char(unit);
      }
    }
    std::string leave = "[^\\x22\\x5c\\x00-\\x1f" + plain_excluded + "]";
    if (!escape_child) leave = "( " + leave + " | \"\\\\\" ( [\\x22\\x5c/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )";
    alts.push_back(leave + " " + ch + "*");
    std::string body = alternatives(alts);
    if (!node.terminal) body = alts.size() == 1 ? "( " + body + " )?" : body + "?";
    rule[id] = add_rule(hint + "-key", body);
  }
  return "\"\\\"\" " + rule[0] + " \"\\\"\"";
}

Result<std::string> Converter::visit_object(const ojson& s, const std::string& ptr,
                                            const std::string& hint) {
  struct Prop {
    std::string name;
    ojson schema;
    std::string ptr;
    bool required = false;
  };
  std::vector<Prop> props;
  const std::string pptr = ptr_join(ptr, "properties");
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) return err(pptr, "must be an object");
    for (const auto& [name, sub] : s["properties"].items())
      props.push_back({name, sub, ptr_join(pptr, name), false});
  }
  const std::string rptr = ptr_join(ptr, "required");
  if (s.contains("required")) {
    if (!s["required"].is_array()) return err(rptr, "must be an array of strings");
    for (const auto& r : s["required"]) {
      if (!r.is_string()) return err(rptr, "must be an array of strings");
      const std::string name = r.get<std::string>();
      auto it = std::find_if(props.begin(), props.end(), [&](const Prop& p) { return p.name == name; });
      if (it == props.end()) {
        props.push_back({name, ojson(true), rptr, true});
      } else {
        it->required = true;
      }
    }
  }
  const std::string aptr = ptr_join(ptr, "additionalProperties");
  const bool has_additional = s.contains("additionalProperties");
  const ojson additional = has_additional ? s["additionalProperties"] : ojson(true);
  if (!additional.is_boolean() && !additional.is_object())
    return err(aptr, "must be a boolean or a schema");
  if (opt_.strict) {
    for (const Prop& p : props)
      if (!p.required)
        return err(rptr, fmt::format("strict mode requires every property to be required; '{}' "
                                     "is not (make it nullable instead, or set strict: false)",
                                     p.name));
    if (!has_additional || additional != ojson(false))
      return err(aptr, "strict mode requires additionalProperties: false on every object");
  }
  const std::string ws = json(JsonRule::kWs);
  const std::string comma = ws + " \",\" " + ws;
  std::vector<std::string> kv;
  for (const Prop& p : props) {
    auto v = visit(p.schema, p.ptr, child_hint(hint, p.name));
    if (!v) return v.error_value();
    kv.push_back(gbnf_literal(ojson(p.name).dump()) + " " + ws + " \":\" " + ws + " " + *v);
  }
  std::string extra;  // one extra member, as a rule name
  if (additional != ojson(false)) {
    auto v = visit(additional, aptr, child_hint(hint, "additional"));
    if (!v) return v.error_value();
    std::vector<std::string> names;
    for (const Prop& p : props) names.push_back(p.name);
    const std::string key = names.empty() ? json(JsonRule::kString)
                                          : key_excluding(names, child_hint(hint, "extra"));
    extra = add_rule(child_hint(hint, "extra-kv"), key + " " + ws + " \":\" " + ws + " " + *v);
  }
  const size_t n = props.size();
  size_t first_required = n;
  for (size_t i = 0; i < n; ++i)
    if (props[i].required) {
      first_required = i;
      break;
    }
  // rest[i]: members i.. (each after a comma) and the extra members; a rule for the indices the
  // alternatives below refer to, flat text beyond.
  const std::string tail = extra.empty() ? "" : "( " + comma + " " + extra + " )*";
  std::vector<std::string> rest(n + 1);
  rest[n] = tail;
  for (size_t i = n; i-- > 0;) {
    const std::string item = props[i].required ? comma + " " + kv[i] : "( " + comma + " " + kv[i] + " )?";
    rest[i] = rest[i + 1].empty() ? item : item + " " + rest[i + 1];
    if (i <= first_required + 1 && i >= 1) rest[i] = add_rule(child_hint(hint, "rest"), rest[i]);
  }
  std::vector<std::string> alts;
  for (size_t i = 0; i <= std::min(first_required, n); ++i) {
    if (i < n) {
      alts.push_back(rest[i + 1].empty() ? kv[i] : kv[i] + " " + rest[i + 1]);
    } else if (!extra.empty()) {
      alts.push_back(extra + " " + rest[n]);
    }
  }
  std::string body;
  if (alts.empty()) {
    body = "\"{\" " + ws + " \"}\"";
  } else if (first_required < n) {
    body = "\"{\" " + ws + " " + alternatives(alts) + " " + ws + " \"}\"";
  } else {
    body = "\"{\" " + ws + " ( " + alternatives(alts) + " " + ws + " )? \"}\"";
  }
  return add_rule(hint.empty() ? opt_.root_name + "-object" : hint, body);
}

Result<std::string> Converter::visit_array(const ojson& s, const std::string& ptr,
                                           const std::string& hint) {
  if (s.contains("uniqueItems") && s["uniqueItems"] != ojson(false))
    return err(ptr_join(ptr, "uniqueItems"), "only uniqueItems: false is supported");
  auto min_items = count_keyword(s, "minItems", ptr);
  if (!min_items) return min_items.error_value();
  auto max_items = count_keyword(s, "maxItems", ptr);
  if (!max_items) return max_items.error_value();
  const uint64_t lo = min_items->value_or(0);
  std::optional<uint64_t> hi = *max_items;
  if (hi && *hi < lo) return err(ptr_join(ptr, "maxItems"), "is below minItems");
  if (lo > 100000 || (hi && *hi > 100000))
    return err(ptr_join(ptr, lo > 100000 ? "minItems" : "maxItems"), "above 100000 is not supported");

  std::vector<std::string> prefix;
  ojson items = s.contains("items") ? s["items"] : ojson(true);
  std::string items_ptr = ptr_join(ptr, "items");
  auto add_prefix = [&](const ojson& list, const std::string& lptr) -> Status {
    for (size_t i = 0; i < list.size(); ++i) {
      auto e = visit(list[i], ptr_join(lptr, std::to_string(i)), child_hint(hint, std::to_string(i)));
      if (!e) return e.error_value();
      prefix.push_back(*e);
    }
    return {};
  };
  if (s.contains("prefixItems")) {
    const std::string lptr = ptr_join(ptr, "prefixItems");
    if (!s["prefixItems"].is_array()) return err(lptr, "must be an array of schemas");
    if (auto st = add_prefix(s["prefixItems"], lptr); !st) return st.error_value();
  }
  if (items.is_array()) {  // draft 4-7 tuple form
    if (!prefix.empty()) return err(items_ptr, "an items array cannot follow prefixItems");
    if (auto st = add_prefix(items, items_ptr); !st) return st.error_value();
    items = ojson(true);
  }
  std::string item;
  if (items != ojson(false)) {
    auto e = visit(items, items_ptr, child_hint(hint, "item"));
    if (!e) return e.error_value();
    item = *e;
  } else {
    hi = hi ? std::min<uint64_t>(*hi, prefix.size()) : prefix.size();
    if (lo > *hi) return err(ptr_join(ptr, "minItems"), "asks for more items than prefixItems allows");
  }
  if (hi && prefix.size() > *hi) prefix.resize(*hi);
  const std::string ws = json(JsonRule::kWs);
  const std::string comma = ws + " \",\" " + ws;
  const uint64_t p = prefix.size();
  std::string seq;
  if (p == 0) {
    if (!item.empty() && (!hi || *hi > 0)) {
      std::optional<uint64_t> more_hi;
      if (hi) more_hi = *hi - 1;
      seq = item;
      const std::string more = gbnf_repeat("( " + comma + " " + item + " )", lo > 0 ? lo - 1 : 0, more_hi);
      if (!(more_hi && *more_hi == 0)) seq += " " + more;
    }
  } else {
    std::string tail;
    if (!item.empty() && (!hi || *hi > p)) {
      std::optional<uint64_t> t_hi;
      if (hi) t_hi = *hi - p;
      tail = gbnf_repeat("( " + comma + " " + item + " )", lo > p ? lo - p : 0, t_hi);
    }
    seq = tail.empty() ? prefix[p - 1] : prefix[p - 1] + " " + tail;
    for (uint64_t k = p - 1; k-- > 0;) {
      const std::string next = comma + " " + seq;
      seq = prefix[k] + " " + (k + 1 < lo ? next : "( " + next + " )?");
    }
  }
  std::string body;
  if (seq.empty()) {
    if (lo > 0) return err(ptr_join(ptr, "minItems"), "asks for items the array cannot hold");
    body = "\"[\" " + ws + " \"]\"";
  } else if (lo == 0) {
    body = "\"[\" " + ws + " ( " + seq + " " + ws + " )? \"]\"";
  } else {
    body = "\"[\" " + ws + " " + seq + " " + ws + " \"]\"";
  }
  return add_rule(hint.empty() ? opt_.root_name + "-array" : hint, body);
}

}  // namespace

Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema,
                                        const SchemaGrammarOptions& opt) {
  try {
    return Converter(schema, opt).run();
  } catch (const nlohmann::json::exception& e) {  // e.g. dump() of a string that is not UTF-8
    return make_error("(root): {}", e.what());
  }
}

Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema,
                                        const SchemaGrammarOptions& opt) {
  try {
    return json_schema_to_gbnf(nlohmann::ordered_json::parse(schema.dump()), opt);
  } catch (const nlohmann::json::exception& e) {
    return make_error("(root): {}", e.what());
  }
}

Result<std::string> json_schema_text_to_gbnf(std::string_view schema_text,
                                             const SchemaGrammarOptions& opt) {
  nlohmann::ordered_json schema = nlohmann::ordered_json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) return Error("(root): invalid JSON");
  return json_schema_to_gbnf(schema, opt);
}

}  // namespace cadenza
