// The public API around rendering: the Hugging Face globals (raise_exception, strftime_now),
// context handling, the injectable clock and the ChatML fallback template.
#include "render_helper.h"

namespace cadenza::tmpl::test {
namespace {

TEST(TemplateApi, StrftimeNowUsesTheInjectedClock) {
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%B %d, %Y') }}|{{ strftime_now('%Y-%m-%d') }}"),
            "29 Nov 2026|November 29, 2026|2026-11-29");
  EXPECT_EQ(render("{{ strftime_now('%A %j') }}"), "Sunday 333");
  EXPECT_EQ(render("{{ strftime_now is defined }}"), "True");
  RenderOptions o;
  o.strftime_now = [](std::string_view fmt) { return "fmt=" + std::string(fmt); };
  EXPECT_EQ(render("{{ strftime_now('%Y') }}", test_context(), o), "fmt=%Y");
}

TEST(TemplateApi, DefaultClockIsTheRealOne) {
  RenderOptions o;  // no strftime_now: local time now
  const std::string year = render("{{ strftime_now('%Y') }}", test_context(), o);
  ASSERT_EQ(year.size(), 4u) << year;
  EXPECT_GE(std::stoi(year), 2024);
}

TEST(TemplateApi, ContextShadowsGlobalsAndKeepsKeyOrder) {
  const auto ctx = nlohmann::ordered_json::parse(R"({"range": "mine", "obj": {"z": 1, "a": 2, "m": 3}})");
  EXPECT_EQ(render("{{ range }}", ctx), "mine");
  EXPECT_EQ(render("{{ obj|tojson }} {% for k, v in obj.items() %}{{ k }}{% endfor %} {{ obj }}", ctx),
            R"({"z": 1, "a": 2, "m": 3} zam {'z': 1, 'a': 2, 'm': 3})");
}

TEST(TemplateApi, JsonNumbersAndNullsBecomePythonValues) {
  const auto ctx = nlohmann::ordered_json::parse(
      R"({"i": 7, "big": 18446744073709551615, "neg": -3, "fl": 2.0, "e": 1e-7, "n": null, "b": false})");
  EXPECT_EQ(render("{{ i }} {{ big }} {{ neg }} {{ fl }} {{ e }} {{ n }} {{ b }} {{ i is integer }} {{ fl is float }}", ctx),
            "7 1.8446744073709552e+19 -3 2.0 1e-07 None False True True");
  EXPECT_EQ(render("{{ [i, fl, e, n, b]|tojson }}", ctx), "[7, 2.0, 1e-07, null, false]");
}

TEST(TemplateApi, TemplatesAreReusable) {
  auto t = Template::parse("{{ x }}");
  ASSERT_TRUE(t.ok());
  const Template copy = *t;  // copies share the parsed tree
  EXPECT_EQ(*copy.render({{"x", 1}}), "1");
  EXPECT_EQ(*t->render({{"x", "two"}}), "two");
}

TEST(TemplateApi, ChatmlFallback) {
  auto t = Template::parse(chatml_template());
  ASSERT_TRUE(t.ok()) << t.error();
  const auto ctx = nlohmann::ordered_json::parse(R"({"messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi é"},
      {"role": "assistant", "content": null, "tool_calls": []},
      {"role": "user", "content": [{"type": "text", "text": "part"}]}],
    "add_generation_prompt": true})");
  EXPECT_EQ(*t->render(ctx),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi é<|im_end|>\n"
            "<|im_start|>assistant\n<|im_end|>\n"
            "<|im_start|>user\n[{\"type\": \"text\", \"text\": \"part\"}]<|im_end|>\n"
            "<|im_start|>assistant\n");
  auto no_prompt = ctx;
  no_prompt["add_generation_prompt"] = false;
  no_prompt["messages"] = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "x"}])");
  EXPECT_EQ(*t->render(no_prompt), "<|im_start|>user\nx<|im_end|>\n");
}

TEST(TemplateApi, LoopControlsAndGenerationTag) {
  // The loopcontrols extension and Hugging Face's {% generation %} tag are enabled.
  EXPECT_EQ(render("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}"
                   "{{ i }}{% endfor %}"),
            "02");
  EXPECT_EQ(render("{% generation %}{{ s }}{% endgeneration %}"), "hi");
}

TEST(TemplateApi, IteratorsBehaveLikePythonGenerators) {
  // Jinja2's select/map return generators: always true, and spent after one pass.
  EXPECT_EQ(render("{% if msgs|selectattr('role', 'equalto', 'system') %}yes{% endif %}"), "yes");
  EXPECT_EQ(render("{% set g = msgs|map(attribute='role') %}{{ g|join(',') }}|{{ g|join(',') }}"), "user,assistant|");
  EXPECT_EQ(render("{{ msgs|selectattr('role', 'equalto', 'system')|list|length }}"), "0");
}

}  // namespace
}  // namespace cadenza::tmpl::test
