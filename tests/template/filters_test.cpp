// Filters, tests and Python methods, and tojson's formatting (Python json.dumps with
// ensure_ascii=False); expected outputs are Jinja2 3.1.6's with Hugging Face's tojson.
#include "render_helper.h"

namespace cadenza::tmpl::test {
namespace {

TEST(TemplateFilters, MatchJinja2) {
  expect_renders({
    {R"T({{ [1,2,3][5] }}|{{ x|default('d') }}|{{ none|default('d') }}|{{ ''|default('d', true) }})T",
     R"T(|d|None|d)T"},
    {R"T({{ 'ABC'|lower }} {{ 'hello world-foo(bar'|title }} {{ 'hEllo'|capitalize }} {{ [1,2,2,'a','A']|unique|list }})T",
     R"T(abc Hello World-Foo(Bar Hello [1, 2, 'a'])T"},
    {R"T({{ {'b':1,'a':2}|dictsort }} {{ ['b','A','a']|sort }} {{ [1,None]|tojson }} {{ {'a':'é'}|tojson(true) }})T",
     R"T([('a', 2), ('b', 1)] ['A', 'a', 'b'] [1, null] {"a": "\u00e9"})T"},
    {R"T({{ 3.7|round }} {{ 2.5|round }} {{ 2.675|round(2) }} {{ 3.14159|round(2,'floor') }} {{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ '1e3'|float }})T",
     R"T(4.0 2.0 2.67 3.14 42 4 0 1000.0)T"},
    {R"T({{ "  a\n b\n\n c"|indent(2) }}|{{ "a\nb"|indent(2, true) }}|{{ 'ab'|center(6) }}|{{ 'a b, c'|wordcount }})T",
     R"T(  a
   b

   c|  a
  b|  ab  |3)T"},
    {R"T({{ [1,2,3]|sum }} {{ [1,2,3]|max }} {{ ['b','A']|min }} {{ -3|abs }} {{ [1,2,3,4,5]|batch(2)|list }})T",
     R"T(6 3 A 3 [[1, 2], [3, 4], [5]])T"},
    {R"T({{ 'a %s b %d' % ('x', 3) }} {{ '%5.2f|%-4s|%r' % (3.14159, 'a', 'b') }} {{ '{} {x}'.format(1, x=2) }})T",
     R"T(a x b 3  3.14|a   |'b' 1 2)T"},
    {R"T({{ s.upper() }} {{ s.startswith(('h','x')) }} {{ 'a-b-c'.rsplit('-', 1) }} {{ 'abc'.find('c') }} {{ ' x '.strip() }}|{{ 'xxaxx'.strip('x') }})T",
     R"T(HI True ['a-b', 'c'] 2 x|a)T"},
    {R"T({{ d.get('a') }} {{ d.get('z', 5) }} {{ d.values()|list }} {{ d.items()|list }})T",
     R"T(1 5 [1, [1, 2]] [('a', 1), ('b', [1, 2])])T"},
    {R"T({{ 1 if false }}|{{ none }}|{{ true }}|{{ 1.0 }}|{{ [1.0, 'a\nb', "it's", 'q"'] }})T",
     R"T(|None|True|1.0|[1.0, 'a\nb', "it's", 'q"'])T"},
    {R"T({{ l|sort(reverse=true) }} {{ msgs|map(attribute='role')|join(',') }} {{ msgs|selectattr('role', 'equalto', 'user')|list|length }} {{ l|select('odd')|list }} {{ l|reject('odd')|list }})T",
     R"T([3, 2, 1] user,assistant 1 [3, 1] [2])T"},
    {R"T({{ msgs|rejectattr('role', 'eq', 'user')|map(attribute='content')|first }} {{ l|map('string')|join('-') }} {{ [' a ', 'b ']|map('trim')|list }})T",
     R"T(Yo 3-1-2 ['a', 'b'])T"},
    {R"T({{ u|length }} {{ u[1] }} {{ u[::-1] }} {{ u[2:5] }} {{ u.upper() }} {{ u|title }} {{ u.find('w') }})T",
     R"T(11 é dlröw olléh llo HÉLLO WÖRLD Héllo Wörld 6)T"},
    {R"T({{ f|int }} {{ f|string }} {{ 1e100 }} {{ 1.0e-10 }} {{ 123456789012345678.0 }} {{ 0.1 + 0.2 }} {{ 1/3 }})T",
     R"T(1 1.5 1e+100 1e-10 1.2345678901234568e+17 0.30000000000000004 0.3333333333333333)T"},
    {R"T({{ d|tojson(indent=2) }}|{{ msgs|tojson }}|{{ "a\u00e9\n\"\\"|tojson }}|{{ [1.0, 2.5e-7, none, true]|tojson }})T",
     R"T({
  "a": 1,
  "b": [
    1,
    2
  ]
}|[{"role": "user", "content": "Hi é"}, {"role": "assistant", "content": "Yo"}]|"aé\n\"\\"|[1.0, 2.5e-07, null, true])T"},
    {R"T({{ d|tojson(separators=(',', ':')) }} {{ {'b': 1, 'a': [] , 'c': {}}|tojson(sort_keys=true, indent=1) }})T",
     R"T({"a":1,"b":[1,2]} {
 "a": [],
 "b": 1,
 "c": {}
})T"},
    {R"T({{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }})T",
     R"T([0, 1, 2] [1, 4, 7] [5, 3, 1])T"},
    {R"T({{ d|length }} {{ s|length }} {{ d|first }} {{ l|last }} {{ l|reverse|list }} {{ 'abc'|reverse }} {{ s|list }})T",
     R"T(2 2 a 2 [2, 1, 3] cba ['h', 'i'])T"},
    {R"T({{ n|string }} {{ n|trim }} {{ t|string }} {{ d|string }} {{ d.b|join(', ') }})T",
     R"T(None None True {'a': 1, 'b': [1, 2]} 1, 2)T"},
    {R"T({{ 'A b'|lower|replace('a', 'x') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'x,y'.split(',')|join('+') }} {{ '  a  b '.split() }})T",
     R"T(x b bba x+y ['a', 'b'])T"},
    {R"T({{ msgs[0]['role'] }} {{ msgs[0].role }} {{ msgs[-1]['content']|upper }} {{ msgs|length - 1 }})T",
     R"T(user user YO 1)T"},
    {R"T({{ "%s-%s" | format(1, 2) }} {{ "%(a)s" | format(a=3) }})T",
     R"T(1-2 3)T"},
    {R"T({{ d.keys()|list }} {{ d|dictsort(reverse=true) }} {{ d|items|list }})T",
     R"T(['a', 'b'] [('b', [1, 2]), ('a', 1)] [('a', 1), ('b', [1, 2])])T"},
    {R"T({{ ['B', 'a', 'C']|sort(case_sensitive=true) }} {{ [{'a': 2}, {'a': 1}]|sort(attribute='a') }} {{ ['b', 'A']|max }})T",
     R"T(['B', 'C', 'a'] [{'a': 1}, {'a': 2}] b)T"},
    {R"T({{ (msgs|selectattr('role', 'equalto', 'system')|list|length) > 0 }} {{ msgs|selectattr('role','eq','system') is iterable }})T",
     R"T(False True)T"},
    {R"T({{ 'x'|tojson }}{{ 3|tojson }}{{ none|tojson }}{{ true|tojson }}{{ (1,2)|tojson }}{{ {'a': (1,)}|tojson(indent=0) }})T",
     R"T("x"3nulltrue[1, 2]{
"a": [
1
]
})T"},
    {R"T({{ {1: 'a', none: 2, 1.5: 3, true: 4}|tojson }})T",
     R"T({"1": 4, "null": 2, "1.5": 3})T"},
    {R"T({{ d|tojson(indent='\t') }})T",
     R"T({
	"a": 1,
	"b": [
		1,
		2
	]
})T"},
    {R"T({{ "\u2028\u0000\u007f"|tojson }} {{ "😀"|tojson(ensure_ascii=true) }})T",
     R"T(" \u0000" "\ud83d\ude00")T"},
    {R"T({{ "{:>5}|{:<5}|{:^5}|{:05d}|{:.2f}|{:+d}|{!r}".format('a', 'b', 'c', 42, 3.14159, 5, 'x') }})T",
     R"T(    a|b    |  c  |00042|3.14|+5|'x')T"},
    {R"T({{ '%-5s|%5d|%05.1f|%x|%c|%%' % ('ab', 42, 3.14159, 255, 65) }})T",
     R"T(ab   |   42|003.1|ff|A|%)T"},
    {R"T({{ l|sum(start=10) }} {{ [[1],[2]]|sum(start=[]) }} {{ msgs|sum(attribute='x') if false }})T",
     R"T(16 [1, 2] )T"},
    {R"T({{ "hello world"|truncate(8) }} {{ "hello world"|truncate(8, true) }} {{ "hello world foo"|truncate(11, false, '..', 0) }})T",
     R"T(hello world hello world hello..)T"},
    {R"T({{ 'Hello World'|wordcount }} {{ '<b>x</b>  y'|striptags }} {{ 'a&b<c>"'|e }})T",
     R"T(2 x y a&amp;b&lt;c&gt;&#34;)T"},
    {R"T({{ [1,2,3,4,5]|slice(2)|list }} {{ [1,2,3,4]|batch(3, 0)|list }})T",
     R"T([[1, 2, 3], [4, 5]] [[1, 2, 3], [4, 0, 0]])T"},
    {R"T({{ 'x'|center(4) }}|{{ 'abc'|indent }}|{{ 'a\n\nb'|indent(2, blank=true) }}
)T",
     R"T( x  |abc|a
  
  b)T"},
    {R"T({{ d|tojson }}|{{ msgs|tojson(indent=2) }})T",
     R"T({"a": 1, "b": [1, 2]}|[
  {
    "role": "user",
    "content": "Hi é"
  },
  {
    "role": "assistant",
    "content": "Yo"
  }
])T"},
    {R"T({{ {'name': 'é "q" \\ \n', 'n': [1, 2.5, none, true, false], 'o': {}}|tojson }})T",
     R"T({"name": "é \"q\" \\ \n", "n": [1, 2.5, null, true, false], "o": {}})T"},
    {R"T({{ {'a': {'b': [1, {'c': 'ü'}]}}|tojson(indent=4) }})T",
     R"T({
    "a": {
        "b": [
            1,
            {
                "c": "ü"
            }
        ]
    }
})T"},
    {R"T({{ [1, 2]|tojson(separators=(',', ':')) }} {{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }} {{ 'é'|tojson(ensure_ascii=true) }})T",
     R"T([1,2] {"a": 2, "b": 1} "\u00e9")T"},
    {R"T({{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'Hello'|upper }}|{{ 'Hello'|lower }}|{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }})T",
     R"T(x|a|HELLO|hello|Hello World|Hello)T"},
    {R"T({{ [3, 1, 2]|sort|join(',') }} {{ [3, 1, 2]|sort(reverse=true)|list }} {{ ['b', 'A', 'c']|sort|list }} {{ [1, 2, 1, 3]|unique|list }})T",
     R"T(1,2,3 [3, 2, 1] ['A', 'b', 'c'] [1, 2, 3])T"},
    {R"T({{ msgs|map(attribute='role')|list }} {{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|first }} {{ msgs|rejectattr('role', 'eq', 'user')|list|length }})T",
     R"T(['user', 'assistant'] Hi é 1)T"},
    {R"T({{ [1, 2, 3, 4]|select('even')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ [0, 1, '', 'a']|select|list }} {{ [1, 2, 3]|select('gt', 1)|list }})T",
     R"T([2, 4] [2, 4] [1, 'a'] [2, 3])T"},
    {R"T({{ l|first }} {{ l|last }} {{ l|length }} {{ l|count }} {{ l|sum }} {{ l|min }} {{ l|max }} {{ [-1.5]|map('abs')|list }})T",
     R"T(3 2 3 3 6 1 3 [1.5])T"},
    {R"T({{ 3.14159|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ '12'|int + 1 }} {{ '3.9'|int }} {{ 'abc'|int(-1) }} {{ '2.5'|float * 2 }} {{ 7|float }})T",
     R"T(3.14 2.0 4.0 13 3 -1 5.0 7.0)T"},
    {R"T({{ x|default('dflt') }} {{ x|d('d2') }} {{ ''|default('empty', true) }} {{ none|default('n') }} {{ 0|default('z', boolean=true) }})T",
     R"T(dflt d2 empty None z)T"},
    {R"T({{ 'a\nb\nc'|indent(2) }}|{{ 'a\nb'|indent(4, first=true) }}|{{ 'abc'|center(9) }}|{{ 'one two  three'|wordcount }})T",
     R"T(a
  b
  c|    a
    b|   abc   |3)T"},
    {R"T({{ 'hello'|replace('l', 'L') }} {{ 'aaa'|replace('a', 'b', 1) }} {{ d|dictsort }} {{ d|items|list }} {{ 'abc'|list }})T",
     R"T(heLLo baa [('a', 1), ('b', [1, 2])] [('a', 1), ('b', [1, 2])] ['a', 'b', 'c'])T"},
    {R"T({{ none|string }} {{ 1.0|string }} {{ [1, 'a']|string }} {{ {'k': none}|string }} {{ (1,)|string }} {{ true|string }})T",
     R"T(None 1.0 [1, 'a'] {'k': None} (1,) True)T"},
    {R"T({{ '%s is %d years' % ('Bob', 42) }} {{ '{} and {}'.format('a', 'b') }} {{ '%.2f'|format(2.0) }} {{ '<a href="x">'|e }})T",
     R"T(Bob is 42 years a and b 2.00 &lt;a href=&#34;x&#34;&gt;)T"},
    {R"T({{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a-b-c'.rsplit('-', 1) }} {{ 'x\ny\r\nz'.splitlines() }} {{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }})T",
     R"T(['a', 'b', '', 'c'] ['a', 'b'] ['a-b', 'c'] ['x', 'y', 'z'] True True)T"},
    {R"T({{ '  pad  '.strip() }}|{{ '  pad  '.lstrip() }}|{{ '  pad  '.rstrip() }}|{{ '\n\nx\n'.strip('\n') }}|{{ 'abcabc'.find('c') }}|{{ 'abcabc'.rfind('c') }}|{{ 'abcabc'.count('b') }})T",
     R"T(pad|pad  |  pad|x|2|5|2)T"},
    {R"T({{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'fallback') }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }})T",
     R"T(1 None fallback ['a', 'b'] [1, [1, 2]] [('a', 1), ('b', [1, 2])])T"},
    {R"T({{ 'x'.join(['a', 'b']) }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'a b'.title() }} {{ 'x'.center(5, '-') }} {{ '7'.zfill(3) }} {{ 'a=b'.partition('=') }})T",
     R"T(axb AB ab A B --x-- 007 ('a', '=', 'b'))T"},
    {R"T({{ 1 is odd }} {{ 2 is even }} {{ 9 is divisibleby 3 }} {{ 'x' is string }} {{ 1 is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ d is mapping }} {{ l is sequence }} {{ l is iterable }} {{ n is none }} {{ t is boolean }} {{ x is undefined }} {{ 'A' is upper }} {{ 'a' is lower }})T",
     R"T(True True True True True True True True True True True True True True True)T"},
  });
}

}  // namespace
}  // namespace cadenza::tmpl::test
