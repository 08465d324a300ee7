// Whitespace handling as Hugging Face configures Jinja2: trim_blocks, lstrip_blocks, `-`/`+`
// markers, comments, raw blocks, newline normalisation and the dropped final newline.
#include "render_helper.h"

namespace cadenza::tmpl::test {
namespace {

TEST(TemplateWhitespace, MatchesJinja2) {
  expect_renders({
    {R"T(a
  {% if true %}
    b
  {% endif %}
c
)T",
     R"T(a
    b
c)T"},
    {R"T(a
  {%- if true %}
    b
  {%+ endif %}
c)T",
     R"T(a    b
  c)T"},
    {R"T(a  {% if true %}  b  {% endif %}  c)T",
     R"T(a    b    c)T"},
    {R"T(  {% if true -%}

   b   
{%- endif %}  
)T",
     R"T(b  )T"},
    {R"T({# comment #}
x
  {# c2 #}
y)T",
     R"T(x
y)T"},
    {R"T(x {#- c -#} y)T",
     R"T(xy)T"},
    {R"T({% raw %}{{ x }}{% endraw %}
{%- raw -%}  {% if %}  {%- endraw %})T",
     R"T({{ x }}{% if %})T"},
    {"a\r\nb\r{{ 'c' }}\n\n",
     R"T(a
b
c
)T"},
    {R"T({{ 'a' }}
{{ 'b' }}
)T",
     R"T(a
b)T"},
    {R"T({% for i in [1,2] %}
  {{ i }}
{% endfor %}
)T",
     R"T(  1
  2
)T"},
    {R"T({% for i in [1,2] -%}
  {{ i }}
{%- endfor %})T",
     R"T(12)T"},
    {R"T(  {{- 'x' -}}  
  y)T",
     R"T(xy)T"},
    {R"T(	{% if true %}	y{% endif %})T",
     R"T(	y)T"},
    {R"T({% if true %}   
x{% endif %})T",
     R"T(   
x)T"},
    {R"T({% if true %}

x{% endif %})T",
     R"T(
x)T"},
    {R"T(x
{% if true %}{% endif %}
y)T",
     R"T(x
y)T"},
    {R"T(   {% if true %}x{% endif %}   )T",
     R"T(x   )T"},
    {R"T({% if true %}x{% endif +%}
y)T",
     R"T(x
y)T"},
    {R"T(a {{- 1 }} {{ 2 -}} b)T",
     R"T(a1 2b)T"},
    {R"T({{- 1 -}}

{{- 2 }})T",
     R"T(12)T"},
    {R"T({%- set x = 1 -%}


{{ x }})T",
     R"T(1)T"},
    {R"T(line1
    {% set x = 1 %}
line2)T",
     R"T(line1
line2)T"},
    {R"T({% macro m() -%}
  body
{%- endmacro %}[{{ m() }}])T",
     R"T([body])T"},
    {R"T(x
　 {% if true %}y{% endif %})T",
     R"T(x
y)T"},
    {R"T({%- if true %}
    {{- 'x' }}
{%- endif %}
)T",
     R"T(x)T"},
    {R"T({{ '{{' }} {{ '}}' }} {{ '%}' }})T",
     R"T({{ }} %})T"},
    {R"T({{ {'a': {'b': 1}} }})T",
     R"T({'a': {'b': 1}})T"},
    {R"T({%- for m in msgs %}
{{- m.role }}:{{ m.content }}
{% endfor -%})T",
     R"T(user:Hi é
assistant:Yo
)T"},
  });
}

TEST(TemplateWhitespace, CommentsAndRawProduceNothingElse) {
  EXPECT_EQ(render("a{# {{ not parsed }} {% if %} #}b"), "ab");
  EXPECT_EQ(render("{% raw %}{% for %}{{ }}{% endraw %}"), "{% for %}{{ }}");
  EXPECT_EQ(render(""), "");
  EXPECT_EQ(render("\n"), "");
  EXPECT_EQ(render("\n\n"), "\n");
}

}  // namespace
}  // namespace cadenza::tmpl::test
