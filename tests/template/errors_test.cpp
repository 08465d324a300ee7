// Failures are Error values with Jinja2's wording and the position in the template; untrusted
// templates and contexts cannot crash, hang or exhaust memory (step, output, depth limits).
#include <atomic>
#include <cstdio>
#include <random>
#include <thread>

#include "render_helper.h"

namespace cadenza::tmpl::test {
namespace {

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

TEST(TemplateErrors, SyntaxErrorsNameLineAndColumn) {
  struct C {
    const char* source;
    const char* message;
  };
  const C cases[] = {
      {"line1\n{% if x %}", "TemplateSyntaxError at 2:11: unexpected end of template, expected 'elif' or 'else' or 'endif'"},
      {"{% if %}", "TemplateSyntaxError at 1:7: expected an expression"},
      {"ab\n  {% foo %}", "TemplateSyntaxError at 2:6: Encountered unknown tag 'foo'"},
      {"{% endif %}", "Encountered unknown tag 'endif'"},
      {"{{ (1 }}", "TemplateSyntaxError at 1:7: unexpected '}', expected ')'"},
      {"{{ 1 ]}}", "unexpected ']'"},
      {"{{ 'abc }}", "unterminated string literal"},
      {"{{ x", "missing '}}'"},
      {"{# never closed", "Missing end of comment tag"},
      {"{% raw %}never closed", "Missing end of raw directive"},
      {"{% macro f(a=1, b) %}{% endmacro %}", "non-default argument follows default argument"},
      {"{% break %}", "'break' outside of a loop"},
      {"{% for i in l %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}", "'continue' outside of a loop"},
      {"{% include 'x.j2' %}", "'include' is not supported"},
      {"{% set 1 = 2 %}", "can't assign to integer"},
      {"{{ x is defined is defined }}", "TemplateSyntaxError"},
      {"{{ 99999999999999999999 }}", "integer literal too large"},
      {"{{ '\\x4' }}", "truncated \\xXX escape"},
      {"{{ a ! b }}", "unexpected char '!'"},
  };
  for (const C& c : cases) {
    auto t = Template::parse(c.source);
    ASSERT_FALSE(t.ok()) << c.source;
    EXPECT_TRUE(contains(t.error(), c.message)) << c.source << "\n got: " << t.error();
  }
}

TEST(TemplateErrors, RuntimeErrorsMatchJinja2Wording) {
  struct C {
    const char* source;
    const char* message;
  };
  const C cases[] = {
      {"{{ x.y }}", "UndefinedError at 1:5: 'x' is undefined"},
      {"{{ x() }}", "UndefinedError at 1:5: 'x' is undefined"},
      {"\n\n  {{ d.zz.y }}", "UndefinedError at 3:10: 'dict object' has no attribute 'zz'"},
      {"{{ 1 + 'a' }}", "TypeError at 1:6: unsupported operand type(s) for +: 'int' and 'str'"},
      {"{{ 'a' + 1 }}", "TypeError at 1:8: can only concatenate str (not \"int\") to str"},
      {"{{ n + 1 }}", "unsupported operand type(s) for +: 'NoneType' and 'int'"},
      {"{{ 1 / 0 }}", "ZeroDivisionError at 1:6: division by zero"},
      {"{{ 1 < 'a' }}", "TypeError at 1:4: '<' not supported between instances of 'int' and 'str'"},
      {"{% for a, b in [[1]] %}{% endfor %}", "ValueError at 1:4: not enough values to unpack (expected 2, got 1)"},
      {"{% for x in 5 %}{% endfor %}", "TypeError at 1:13: 'int' object is not iterable"},
      {"{{ x|tojson }}", "TypeError at 1:6: Object of type Undefined is not JSON serializable"},
      {"{{ l.append(4) }}", "SecurityError at 1:12: access to attribute 'append' of 'list' object is unsafe."},
      {"{{ d.update({}) }}", "access to attribute 'update' of 'dict' object is unsafe."},
      {"{{ x|nosuchfilter }}", "No filter named 'nosuchfilter'."},
      {"{{ x is nosuchtest }}", "No test named 'nosuchtest'."},
      {"{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}", "macro 'f' takes not more than 1 argument(s)"},
      {"{% macro f(a) %}{% endmacro %}{{ f(b=2) }}", "macro 'f' takes no keyword argument 'b'"},
      {"{{ m() }}{% macro m() %}{% endmacro %}", "'m' is undefined"},
      {"{% macro m() %}{{ caller() }}{% endmacro %}{{ m() }}", "No caller defined"},
      {"{% set s.attr = 1 %}", "cannot assign attribute on non-namespace object"},
      {"{{ msgs|map(attribute='role')|length }}", "object of type 'generator' has no len()"},
      {"{{ range(1000000)|length }}", "Range too big"},
      {"{{ 'x'.split('') }}", "ValueError at 1:13: empty separator"},
      {"{{ [1]|sort|first < 'a' }}", "not supported between instances of 'int' and 'str'"},
  };
  for (const C& c : cases)
    EXPECT_TRUE(contains(render(c.source), c.message)) << c.source << "\n got: " << render(c.source);
}

TEST(TemplateErrors, RaiseExceptionKeepsTheTemplatesMessage) {
  EXPECT_EQ(render("{{ raise_exception('Only user and assistant roles are supported!') }}"),
            "ERROR: TemplateError: Only user and assistant roles are supported!");
  EXPECT_EQ(render("{% if true %}\n  {{- raise_exception('msg ' ~ l|length) }}\n{% endif %}"), "ERROR: TemplateError: msg 3");
  EXPECT_EQ(render("{% macro m() %}{{ raise_exception('deep') }}{% endmacro %}{% for i in l %}{{ m() }}{% endfor %}"),
            "ERROR: TemplateError: deep");
}

TEST(TemplateErrors, ContextMustBeAnObject) {
  auto t = Template::parse("x");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->render(nlohmann::ordered_json::array()).ok());
  EXPECT_TRUE(t->render(nlohmann::ordered_json::object()).ok());
}

// ---- resource limits ----

TEST(TemplateLimits, StepBudgetStopsRunawayLoops) {
  RenderOptions o = test_options();
  o.max_steps = 200'000;
  const std::string r = render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                               test_context(), o);
  EXPECT_TRUE(contains(r, "LimitError")) << r;
  EXPECT_TRUE(contains(r, "200000 steps")) << r;
}

TEST(TemplateLimits, StepBudgetCountsWorkOnLargeValues) {
  // Each `in` scans a 1 MiB string: cheap in statements, expensive in work.
  RenderOptions o = test_options();
  o.max_steps = 100'000;
  const std::string r = render(
      "{% set ns = namespace(s='x' * 1048576) %}{% for i in range(10000) %}{{ 'y' in ns.s }}{% endfor %}",
      test_context(), o);
  EXPECT_TRUE(contains(r, "LimitError")) << r.substr(0, 200);
}

TEST(TemplateLimits, OutputAndValueSizesAreBounded) {
  RenderOptions o = test_options();
  o.max_output_bytes = 1 << 20;
  EXPECT_TRUE(contains(render("{% for i in range(2000) %}{{ 'abcdefghij' * 100 }}{% endfor %}", test_context(), o),
                       "LimitError"));
  EXPECT_TRUE(contains(render("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                              test_context(), o),
                       "LimitError"));
  EXPECT_TRUE(contains(render("{{ 'x' * 100000000000 }}", test_context(), o), "LimitError"));
  EXPECT_TRUE(contains(render("{{ 'a'|center(100000000) }}", test_context(), o), "LimitError"));
  EXPECT_TRUE(contains(render("{{ 'aaaa'|replace('a', 'b' * 1000000) }}", test_context(), o), "LimitError"));
  EXPECT_TRUE(contains(render("{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
                              test_context(), o),
                       "LimitError"));
}

TEST(TemplateLimits, RecursionIsBounded) {
  // 100 macro levels (max_call_depth), or the 1 MiB stack budget first in sanitizer builds.
  EXPECT_TRUE(contains(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "RecursionError at 1:"));
  EXPECT_TRUE(contains(render("{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}"), "RecursionError"));
  // A tighter native-stack budget stops it earlier, whatever the call-depth limit says.
  RenderOptions o = test_options();
  o.max_call_depth = 1'000'000;
  o.max_stack_bytes = 64 << 10;
  EXPECT_TRUE(contains(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", test_context(), o),
                       "RecursionError"));
  // Legitimate recursion (Hermes-style schema walk) stays well inside the limits.
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(20) }}"),
            "2019181716151413121110987654321");
}

TEST(TemplateLimits, NestingIsBoundedAtParseTime) {
  EXPECT_TRUE(contains(render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"),
                       "expression nested too deeply"));
  std::string chain = "{{ s";
  for (int i = 0; i < 5000; ++i) chain += "|trim";
  EXPECT_TRUE(contains(render(chain + " }}"), "expression nested too deeply"));
  std::string sum = "{{ 1";
  for (int i = 0; i < 5000; ++i) sum += " + 1";
  EXPECT_TRUE(contains(render(sum + " }}"), "expression nested too deeply"));
  std::string blocks;
  for (int i = 0; i < 500; ++i) blocks += "{% if true %}";
  for (int i = 0; i < 500; ++i) blocks += "{% endif %}";
  EXPECT_TRUE(contains(render(blocks), "blocks nested too deeply"));
  // Just below the limits is fine.
  EXPECT_EQ(render("{{ " + std::string(50, '(') + "7" + std::string(50, ')') + " }}"), "7");
}

TEST(TemplateLimits, ValuesCannotNestWithoutBound) {
  EXPECT_TRUE(contains(render("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}"),
                       "nested deeper than"));
  // A namespace that contains itself prints like Python's recursive repr.
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}"), "<Namespace {'self': <Namespace {...}>}>");
  // Deeply nested JSON in the context is refused, not walked recursively without end.
  nlohmann::ordered_json deep = 1;
  for (int i = 0; i < 1000; ++i) deep = nlohmann::ordered_json::array({deep});
  nlohmann::ordered_json ctx = {{"x", deep}};
  EXPECT_TRUE(contains(render("{{ x }}", ctx), "nested deeper than"));
}

// Random bytes and random token soup: parse and render must return, never crash.
TEST(TemplateRobustness, GarbageInputReturnsErrors) {
  std::mt19937 rng(1234);
  const std::vector<std::string> pieces = {"{{", "}}", "{%", "%}", "{#", "#}", "-", "+", "(", ")", "[", "]", "{", "}",
                                           "if", "for", "in", "endif", "endfor", "set", "=", "x", "1", "'s'", "|",
                                           "trim", ".", ",", ":", "not", "is", "defined", "macro", "endmacro", "\n",
                                           " ", "loop", "recursive", "else", "~", "*", "**", "raw", "endraw", "é"};
  int rendered = 0, failed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string src;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) {
      if (rng() % 8 == 0) src.push_back(static_cast<char>(rng() % 256));
      else src += pieces[rng() % pieces.size()];
    }
    RenderOptions o = test_options();
    o.max_steps = 20'000;
    const std::string out = render(src, test_context(), o);
    // Deterministic: the same source renders the same way again.
    EXPECT_EQ(render(src, test_context(), o), out) << src;
    if (out.rfind("ERROR: ", 0) != 0) {
      ++rendered;
      EXPECT_LE(out.size(), o.max_output_bytes);
      continue;
    }
    ++failed;
    // An error names its kind ("TemplateSyntaxError at 1:4: ...", "LimitError: ..."), in
    // Jinja2's/Python's wording: "<Kind>Error" followed by " at LINE:COL: " or ": ".
    const std::string message = out.substr(7);
    const size_t kind_end = message.find("Error");
    ASSERT_NE(kind_end, std::string::npos) << src << "\n got: " << out;
    const std::string rest = message.substr(kind_end + 5);
    EXPECT_TRUE(rest.rfind(": ", 0) == 0 || rest.rfind(" at ", 0) == 0) << src << "\n got: " << out;
    EXPECT_GT(rest.size(), 2u) << src << "\n got: " << out;
  }
  // The generator reaches both outcomes; otherwise it tests only one path.
  std::printf("[ garbage  ] %d rendered, %d errors\n", rendered, failed);
  EXPECT_GT(rendered, 100);
  EXPECT_GT(failed, 100);
}

TEST(TemplateRobustness, InvalidUtf8IsCarriedThrough) {
  nlohmann::ordered_json ctx = {{"s", "ok"}};
  EXPECT_EQ(render("a\xff{{ s }}\xc3", ctx), "a\xffok\xc3");
  EXPECT_EQ(render("{{ '\xff\xfe'|length }} {{ '\xff" "A'[::-1] }}", ctx), "2 A\xff");
}

TEST(TemplateConcurrency, OneTemplateRendersOnManyThreads) {
  auto t = Template::parse(
      "{% set ns = namespace(n=0) %}{% for m in msgs %}{% set ns.n = ns.n + 1 %}{{ m.role }}:{{ m.content|upper }};"
      "{% endfor %}{{ ns.n }}{{ strftime_now('%Y') }}");
  ASSERT_TRUE(t.ok());
  const std::string want = "user:HI É;assistant:YO;22026";
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto r = t->render(test_context(), test_options());
        if (!r || *r != want) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace cadenza::tmpl::test
