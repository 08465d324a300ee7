// libFuzzer target for the Jinja2 chat-template parser and interpreter (src/template): the input is
// a template's source, as a model file would carry it (tokenizer.chat_template is untrusted).
//
// Every input either fails to parse with "TemplateSyntaxError at LINE:COL: ...", or parses and
// renders, against a chat context (messages with tool calls, tools, bos/eos tokens, a few nested
// values), to a string within max_output_bytes or to an error that names its kind
// ("UndefinedError ...", "LimitError: ..."). Rendering the same template again gives the same
// result (no state leaks between renders). Crashes, leaks, hangs, exceptions escaping render() and
// runaway memory are findings. Seeds: fuzz/corpus/template plus ../shared/chat_templates/*.jinja
// (scripts/fuzz.sh copies them in when present); dictionary: fuzz/jinja.dict.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "template/template.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Hi \u00e9 \ud83d\ude00"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get", "arguments": {"city": "Paris", "n": 2}}}]},
      {"role": "tool", "content": "{\"t\": 21.5}"},
      {"role": "assistant", "content": "Sunny.", "reasoning_content": "think"},
      {"role": "user", "content": [{"type": "text", "text": "and now?"}]}],
    "tools": [{"type": "function", "function": {"name": "get", "description": "weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
    "d": {"a": 1, "b": [1, 2.5, null, true]}, "s": "x", "n": null, "l": [3, 1, 2]})");
  return ctx;
}

// "<Kind>Error" then " at LINE:COL: " or ": ", then a message.
void check_error(const std::string& e) {
  const size_t kind = e.find("Error");
  check(kind != std::string::npos && kind > 0);
  const std::string_view rest = std::string_view(e).substr(kind + 5);
  check(rest.substr(0, 2) == ": " || rest.substr(0, 4) == " at ");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto t = cadenza::tmpl::Template::parse(source);
  if (!t) {
    check(t.error().rfind("TemplateSyntaxError", 0) == 0);
    check_error(t.error());
    return 0;
  }
  cadenza::tmpl::RenderOptions opts;
  opts.strftime_now = cadenza::tmpl::fixed_clock(2024, 7, 1);
  opts.max_steps = 100'000;  // keeps each input fast; the limits are part of what is fuzzed
  opts.max_output_bytes = size_t{1} << 20;
  auto out = t->render(context(), opts);
  if (out) {
    check(out->size() <= opts.max_output_bytes);
  } else {
    check_error(out.error());
  }
  auto again = t->render(context(), opts);
  check(again.ok() == out.ok());
  check(out ? *again == *out : again.error() == out.error());
  return 0;
}
