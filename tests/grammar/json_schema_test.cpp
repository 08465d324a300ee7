// The JSON Schema and json_object converters: every schema of tests/grammar/schemas is converted,
// compiled with the grammar core, and its valid documents (compact and pretty-printed) must be
// accepted, its invalid ones rejected; the data files' valid / invalid sets agree with ajv
// (tests/js/validate.mjs). Errors name the JSON pointer of the problem.
#include "grammar/json_schema_to_gbnf.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "grammar/compiled_grammar.h"
#include "grammar/json_grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_index.h"

namespace cadenza {
namespace {

using nlohmann::ordered_json;

// A vocabulary of the 256 single bytes: accept_bytes checks text, masks are not under test here.
std::shared_ptr<const grammar::TokenIndex> byte_index() {
  static const auto index = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
    return grammar::TokenIndex::build(std::move(bytes), {}, {}, {});
  }();
  return index;
}

struct Checker {
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  std::string error;

  explicit Checker(const std::string& gbnf) {
    auto g = grammar::compile_gbnf(gbnf, byte_index());
    if (g) {
      grammar = *g;
    } else {
      error = g.error();
    }
  }
  bool ok() const { return grammar != nullptr; }
  bool accepts(std::string_view text) const {
    grammar::GrammarMatcher m(grammar);
    return m.accept_bytes(text) && m.can_end();
  }
};

std::string convert_or_fail(const ordered_json& schema, const SchemaGrammarOptions& opt = {}) {
  auto g = json_schema_to_gbnf(schema, opt);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error()) << "\n" << schema.dump();
  return g.ok() ? *g : "";
}

std::vector<std::filesystem::path> schema_files() {
  std::vector<std::filesystem::path> files;
  const std::filesystem::path dir = std::filesystem::path(CADENZA_SOURCE_DIR) / "tests/grammar/schemas";
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(JsonSchemaSuite, ValidDocumentsAcceptedInvalidRejected) {
  const auto files = schema_files();
  ASSERT_GE(files.size(), 30u);
  size_t checked = 0;
  for (const auto& path : files) {
    SCOPED_TRACE(path.filename().string());
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const ordered_json c = ordered_json::parse(text.str());
    SchemaGrammarOptions opt;
    opt.strict = c.value("strict", false);
    const bool compact_only = c.value("compact_only", false);  // enum / const: exact text
    const std::string gbnf = convert_or_fail(c["schema"], opt);
    if (gbnf.empty()) continue;
    const Checker check(gbnf);
    ASSERT_TRUE(check.ok()) << check.error << "\n" << gbnf;
    for (const auto& doc : c["valid"]) {
      EXPECT_TRUE(check.accepts(doc.dump())) << "valid, compact: " << doc.dump() << "\n" << gbnf;
      if (!compact_only) {
        EXPECT_TRUE(check.accepts(doc.dump(2))) << "valid, pretty: " << doc.dump(2) << "\n" << gbnf;
      }
      ++checked;
    }
    for (const auto& doc : c["invalid"]) {
      EXPECT_FALSE(check.accepts(doc.dump())) << "invalid, compact: " << doc.dump() << "\n" << gbnf;
      EXPECT_FALSE(check.accepts(doc.dump(2))) << "invalid, pretty: " << doc.dump(2);
      ++checked;
    }
    for (const auto& t : c.value("valid_text", ordered_json::array())) {
      EXPECT_TRUE(check.accepts(t.get<std::string>())) << "valid text: " << t.get<std::string>();
      ++checked;
    }
    for (const auto& t : c.value("rejected_text", ordered_json::array())) {
      EXPECT_FALSE(check.accepts(t.get<std::string>())) << "rejected text: " << t.get<std::string>();
      ++checked;
    }
  }
  EXPECT_GE(checked, 300u);
}

TEST(JsonSchemaSuite, LongDocumentsStayWithinTheMatcherLimits) {
  // Ambiguous spots (unanchored patterns, extra keys beside declared ones, whitespace) must not
  // multiply the matcher's stacks beyond its limit on long inputs.
  const Checker pattern(convert_or_fail(ordered_json::parse(R"({"type":"string","pattern":"ab+c"})")));
  std::string s = "\"" + std::string(3000, 'a') + "abbbc" + std::string(3000, 'c') + "\"";
  EXPECT_TRUE(pattern.accepts(s));
  EXPECT_FALSE(pattern.accepts("\"" + std::string(6000, 'a') + "\""));

  SchemaGrammarOptions loose;
  loose.strict = false;
  const Checker extra(convert_or_fail(ordered_json::parse(
      R"({"type":"object","properties":{"alpha":{"type":"integer"},"alphabet":{"type":"string"}}})"), loose));
  ordered_json obj = {{"alpha", 1}, {"alphabet", "x"}};
  for (int i = 0; i < 300; ++i) obj["alpha" + std::to_string(i)] = ordered_json::array({i, "v"});
  EXPECT_TRUE(extra.accepts(obj.dump()));
  EXPECT_TRUE(extra.accepts(obj.dump(2)));
  obj["alphabet"] = "y";  // still valid: the same key, its declared place
  EXPECT_TRUE(extra.accepts(obj.dump()));
  EXPECT_FALSE(extra.accepts(R"({"alpha":1,"alphabet":"x","alpha":2})"));

  const Checker tree(convert_or_fail(ordered_json::parse(R"({"$defs":{"n":{"type":"object",
      "properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}},
      "required":["v","kids"],"additionalProperties":false}},"$ref":"#/$defs/n"})")));
  ordered_json node = {{"v", 0}, {"kids", ordered_json::array()}};
  for (int depth = 1; depth <= 18; ++depth)
    node = {{"v", depth}, {"kids", ordered_json::array({node, {{"v", -depth}, {"kids", ordered_json::array()}}})}};
  EXPECT_TRUE(tree.accepts(node.dump()));
  EXPECT_TRUE(tree.accepts(node.dump(1)));
  ordered_json list = ordered_json::array();
  for (int i = 0; i < 2000; ++i) list.push_back(i * 7919 % 100003);
  const Checker ints(convert_or_fail(ordered_json::parse(R"({"type":"array","items":{"type":"integer","minimum":0,"maximum":100003}})")));
  EXPECT_TRUE(ints.accepts(list.dump()));
}

TEST(JsonSchemaSuite, LargeEnumsAreFactoredIntoATrie) {
  // Thousands of values sharing prefixes: one matcher path, not one stack per value.
  ordered_json values = ordered_json::array();
  for (int i = 0; i < 5000; ++i) values.push_back("item-" + std::to_string(i * 7));
  values.push_back("item-");
  values.push_back(42);
  values.push_back("日本");
  values.push_back("日曜");
  const std::string gbnf = convert_or_fail(ordered_json{{"enum", values}});
  const Checker check(gbnf);
  ASSERT_TRUE(check.ok()) << check.error;
  EXPECT_TRUE(check.accepts("\"item-0\""));
  EXPECT_TRUE(check.accepts("\"item-34993\""));
  EXPECT_TRUE(check.accepts("\"item-\""));
  EXPECT_TRUE(check.accepts("42"));
  EXPECT_TRUE(check.accepts("\"日本\""));
  EXPECT_TRUE(check.accepts("\"日曜\""));
  EXPECT_FALSE(check.accepts("\"item-1\""));
  EXPECT_FALSE(check.accepts("\"item-34994\""));
  EXPECT_FALSE(check.accepts("\"日\""));
  EXPECT_FALSE(check.accepts("4"));
}

struct ErrorCase {
  const char* schema;
  bool strict;
  const char* message_start;  // the JSON pointer and what follows
};

TEST(JsonSchemaErrors, NameTheJsonPointer) {
  const ErrorCase cases[] = {
      {R"({"type":"object","properties":{"age":{"type":"integer","multipleOf":2}}})", false,
       "/properties/age/multipleOf: unsupported keyword 'multipleOf'"},
      {R"({"type":"string","foo":1})", false, "/foo: unsupported keyword 'foo'"},
      {R"({"type":"strin"})", false, "/type: unknown type \"strin\""},
      {R"({"type":["string",3]})", false, "/type: unknown type 3"},
      {R"({"properties":{"a":{"$ref":"#/$defs/missing"}}})", false,
       "/properties/a/$ref: unresolvable reference '#/$defs/missing'"},
      {R"({"items":{"$ref":"http://example.com/s.json"}})", false,
       "/items/$ref: only local references"},
      {R"({"$ref":"#/$defs/x","$defs":{"x":{"type":"object","patternProperties":{}}}})", false,
       "/$defs/x/patternProperties: unsupported keyword"},
      {R"({"type":"string","format":"hostname"})", false, "/format: unsupported format 'hostname'"},
      {R"({"type":"string","pattern":"^(a)\\1$"})", false,
       "/pattern: offset 4: backreferences are not supported"},
      {R"({"type":"string","pattern":"(?=a)b"})", false, "/pattern: offset 0: lookaround"},
      {R"({"type":"number","maximum":5.5})", false, "/maximum: bounds on numbers must be integers"},
      {R"({"type":"number","exclusiveMinimum":0})", false, "/exclusiveMinimum: exclusive bounds on numbers"},
      {R"({"type":"number","minimum":2,"maximum":1})", false, "(root): the number range is empty"},
      {R"({"type":"integer","minimum":10,"maximum":1})", false, "(root): the integer range is empty"},
      {R"({"type":"array","minItems":3,"maxItems":2})", false, "/maxItems: is below minItems"},
      {R"({"type":"array","minItems":-1})", false, "/minItems: must be a non-negative integer"},
      {R"({"type":"string","minLength":"2"})", false, "/minLength: must be a non-negative integer"},
      {R"({"type":"array","uniqueItems":true})", false, "/uniqueItems: only uniqueItems: false"},
      {R"({"enum":[]})", false, "/enum: must be a non-empty array"},
      {R"({"anyOf":{}})", false, "/anyOf: must be a non-empty array"},
      {R"({"type":"object","anyOf":[{"required":["a"]}]})", false,
       "/type: cannot be combined with anyOf"},
      {R"({"allOf":[{"type":"string"},{"type":"integer"}]})", false,
       "/allOf/1/type: allOf parts disagree"},
      {R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false},{"properties":{"b":{}}}]})",
       false, "/allOf/0/additionalProperties: forbids property 'b'"},
      {R"({"properties":{"x":false}})", false, "/properties/x: the schema false matches nothing"},
      {R"({"properties":{"x":3}})", false, "/properties/x: a schema must be an object or a boolean"},
      {R"("string")", false, "(root): a schema must be an object or a boolean"},
      {R"({"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false})", true,
       "/required: strict mode requires every property to be required; 'a' is not"},
      {R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]})", true,
       "/additionalProperties: strict mode requires additionalProperties: false"},
      {R"({"type":"object","properties":{"o":{"type":"object","properties":{},"additionalProperties":true}},"required":["o"],"additionalProperties":false})",
       true, "/properties/o/additionalProperties: strict mode"},
      {R"({"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"})", false,
       "/$defs/a/allOf/0/$ref"},
      {R"({"properties":{"a~b/c":{"type":"bogus"}}})", false, "/properties/a~0b~1c/type: unknown type"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.schema);
    SchemaGrammarOptions opt;
    opt.strict = c.strict;
    auto g = json_schema_text_to_gbnf(c.schema, opt);
    ASSERT_FALSE(g.ok()) << *g;
    EXPECT_EQ(g.error().rfind(c.message_start, 0), 0u) << g.error();
  }
  EXPECT_EQ(json_schema_text_to_gbnf("{").error(), "(root): invalid JSON");
}

TEST(JsonSchemaOptions, PrefixesLetSeveralSchemasShareOneGrammar) {
  SchemaGrammarOptions a, b;
  a.rule_prefix = "tool0-";
  a.root_name = "args";
  b.rule_prefix = "tool1-";
  b.root_name = "args";
  const std::string ga = convert_or_fail(ordered_json::parse(
      R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false})"), a);
  const std::string gb = convert_or_fail(ordered_json::parse(
      R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false})"), b);
  EXPECT_EQ(ga.rfind("tool0-args ::= ", 0), 0u) << ga;
  const std::string both = "root ::= tool0-args | tool1-args\n" + ga + gb;
  const Checker check(both);
  ASSERT_TRUE(check.ok()) << check.error << "\n" << both;
  EXPECT_TRUE(check.accepts(R"({"city":"Oslo"})"));
  EXPECT_TRUE(check.accepts(R"({"n":3})"));
  EXPECT_FALSE(check.accepts(R"({"n":"3"})"));
  EXPECT_FALSE(check.accepts(R"({"city":3})"));

  SchemaGrammarOptions bad;
  bad.rule_prefix = "a_b";
  EXPECT_FALSE(json_schema_to_gbnf(ordered_json::object(), bad).ok());
  bad = {};
  bad.root_name = "string";  // would collide with the JSON primitive rule
  EXPECT_FALSE(json_schema_to_gbnf(ordered_json::object(), bad).ok());
  SchemaGrammarOptions tiny;
  tiny.max_output_bytes = 64;
  auto g = json_schema_to_gbnf(ordered_json::parse(R"({"type":"array","items":{"type":"string"}})"), tiny);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().find("max_output_bytes"), std::string::npos);
}

TEST(JsonSchemaOptions, DeclarationOrderNeedsOrderedJson) {
  const char* text = R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"integer"}},
                         "required":["b","a"],"additionalProperties":false})";
  const Checker ordered(*json_schema_text_to_gbnf(text));
  EXPECT_TRUE(ordered.accepts(R"({"b":1,"a":2})"));
  EXPECT_FALSE(ordered.accepts(R"({"a":2,"b":1})"));
  // nlohmann::json sorts keys: the declared order is lost before the converter sees it.
  const Checker sorted(*json_schema_to_gbnf(nlohmann::json::parse(text)));
  EXPECT_TRUE(sorted.accepts(R"({"a":2,"b":1})"));
}

TEST(JsonObjectGrammar, AcceptsAnyObjectOnly) {
  const std::string gbnf = json_object_gbnf();
  const Checker check(gbnf);
  ASSERT_TRUE(check.ok()) << check.error << "\n" << gbnf;
  for (const char* ok : {"{}", "{ }", R"({"a":1})", R"({"a": [1, 2.5e-3, "x", true, null, {"b": {}}]})",
                         "{\n  \"k\": \"v\\n\\u00e9\",\n  \"n\": -0.5\n}", R"({"":{"":[[[]]]}})"}) {
    EXPECT_TRUE(check.accepts(ok)) << ok;
  }
  for (const char* bad : {"[]", "\"s\"", "1", "{", R"({"a":})", R"({"a":1,})", R"({a:1})",
                          "{\"a\":\"raw\x01\"}", R"({"a":01})", "{} ", " {}", "{\n\n}",
                          R"({"a":tru})"}) {
    EXPECT_FALSE(check.accepts(bad)) << bad;
  }
  std::string deep_ws = "{\n" + std::string(kJsonMaxIndent, ' ') + "}";
  EXPECT_TRUE(check.accepts(deep_ws));
  deep_ws = "{\n" + std::string(kJsonMaxIndent + 1, ' ') + "}";
  EXPECT_FALSE(check.accepts(deep_ws));
  // Deep nesting is fine (the matcher's stack is the bound).
  std::string deep = "{\"a\":";
  for (int i = 0; i < 50; ++i) deep += "[";
  for (int i = 0; i < 50; ++i) deep += "]";
  EXPECT_TRUE(check.accepts(deep + "}"));
}

TEST(JsonSchemaNumbers, RangesMatchExactlyTheNumbersInside) {
  const std::pair<int, int> ranges[] = {{0, 1}, {-3, 7}, {-10, -2}, {5, 5}, {-1, 0}, {12, 130}};
  const char* fractions[] = {"", ".0", ".00", ".5", ".25", ".999", ".001"};
  for (const auto& [lo, hi] : ranges) {
    SCOPED_TRACE(::testing::Message() << "[" << lo << ", " << hi << "]");
    const std::string gbnf = convert_or_fail(ordered_json{{"type", "number"}, {"minimum", lo}, {"maximum", hi}});
    const Checker check(gbnf);
    ASSERT_TRUE(check.ok()) << check.error << "\n" << gbnf;
    for (int i = -150; i <= 150; ++i)
      for (const char* f : fractions) {
        const std::string text = std::to_string(i) + f;
        const double v = i < 0 ? -std::stod(std::to_string(-i) + f) : std::stod(text);
        const bool want = v >= lo && v <= hi;
        ASSERT_EQ(check.accepts(text), want) << text << "\n" << gbnf;
        if (i == 0 && *f) {  // "-0.5": negative values between -1 and 0
          const std::string negative = "-0" + std::string(f);
          const double nv = -std::stod("0" + std::string(f));
          if (nv != 0) {
            ASSERT_EQ(check.accepts(negative), nv >= lo && nv <= hi) << negative;
          } else if (check.accepts(negative)) {  // "-0.0" may be left out (narrower), never wrong
            ASSERT_TRUE(lo <= 0 && hi >= 0) << negative;
          }
        }
      }
  }
  const Checker open_top(convert_or_fail(ordered_json{{"type", "number"}, {"minimum", -2}}));
  EXPECT_TRUE(open_top.accepts("123456.5"));
  EXPECT_TRUE(open_top.accepts("-1.99"));
  EXPECT_FALSE(open_top.accepts("-2.01"));
  const Checker open_bottom(convert_or_fail(ordered_json{{"type", "number"}, {"maximum", -2}}));
  EXPECT_TRUE(open_bottom.accepts("-123456.5"));
  EXPECT_TRUE(open_bottom.accepts("-2"));
  EXPECT_FALSE(open_bottom.accepts("-1.5"));
}

TEST(JsonSchemaIntegers, RangesMatchExactlyTheIntegersInside) {
  const std::pair<int, int> ranges[] = {{0, 0}, {-5, 5}, {7, 7}, {-100, -3}, {9, 1001}, {-1, 0}, {13, 47}};
  for (const auto& [lo, hi] : ranges) {
    SCOPED_TRACE(::testing::Message() << "[" << lo << ", " << hi << "]");
    const std::string gbnf = convert_or_fail(ordered_json{{"type", "integer"}, {"minimum", lo}, {"maximum", hi}});
    const Checker check(gbnf);
    ASSERT_TRUE(check.ok()) << check.error << "\n" << gbnf;
    for (int v = -1200; v <= 1200; ++v)
      ASSERT_EQ(check.accepts(std::to_string(v)), v >= lo && v <= hi) << v << "\n" << gbnf;
  }
  const std::string big = convert_or_fail(ordered_json::parse(
      R"({"type":"integer","minimum":-9223372036854775807,"maximum":9223372036854775807})"));
  const Checker check(big);
  EXPECT_TRUE(check.accepts("9223372036854775807"));
  EXPECT_TRUE(check.accepts("-9223372036854775807"));
  EXPECT_FALSE(check.accepts("9223372036854775808"));
}

}  // namespace
}  // namespace cadenza
