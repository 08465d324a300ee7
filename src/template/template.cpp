#include "template/template.h"

#include <nlohmann/json.hpp>

#include "template/ast.h"
#include "template/interpreter.h"
#include "template/lexer.h"
#include "template/parser.h"

namespace cadenza::tmpl {

Result<Template> Template::parse(std::string_view source) {
  auto tokens = lex(source);
  if (!tokens) return tokens.error_value();
  auto body = tmpl::parse(*tokens);
  if (!body) return body.error_value();
  auto program = std::make_shared<Program>();
  program->body = std::move(*body);
  return Template(std::move(program));
}

Result<std::string> Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  Interpreter interpreter(options);
  return interpreter.render(*program_, context);
}

std::string format_time(const std::tm& tm, std::string_view fmt) {
  if (fmt.empty()) return {};
  // strftime reports "buffer too small" and "empty result" alike; grow a few times, then give up.
  const std::string f(fmt);
  for (size_t cap = 256 + fmt.size() * 4; cap <= (size_t{1} << 20); cap *= 8) {
    std::string buf(cap, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), f.c_str(), &tm);
    if (n > 0) {
      buf.resize(n);
      return buf;
    }
  }
  return {};
}

std::function<std::string(std::string_view)> fixed_clock(int year, int month, int day, int hour, int minute,
                                                         int second) {
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  tm.tm_isdst = -1;
  // timegm normalises the fields and fills in the weekday and day of year (%a, %j, %U).
  std::time_t t = timegm(&tm);
  gmtime_r(&t, &tm);
  return [tm](std::string_view fmt) { return format_time(tm, fmt); };
}

std::string_view chatml_template() {
  // Content that is not a string (null for tool calls, a list of parts) is rendered as JSON
  // rather than failing the request.
  return "{%- for message in messages -%}"
         "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
         "{%- if message['content'] is string -%}{{- message['content'] -}}"
         "{%- elif message['content'] is not none and message['content'] is defined -%}"
         "{{- message['content'] | tojson -}}{%- endif -%}"
         "{{- '<|im_end|>\\n' -}}"
         "{%- endfor -%}"
         "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";
}

}  // namespace cadenza::tmpl
