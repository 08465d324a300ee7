// Chat templates: a Jinja2 interpreter that renders a model's `tokenizer.chat_template` the way
// Hugging Face transformers does (see README.md in this folder for the supported language and
// the exact environment).
//
// Usage:
//   auto t = tmpl::Template::parse(source);            // once per model
//   if (!t) return t.error_value();                     // "TemplateSyntaxError at 3:14: ..."
//   nlohmann::ordered_json ctx = {{"messages", msgs}, {"add_generation_prompt", true},
//                                 {"bos_token", "<s>"}, {"eos_token", "</s>"}};
//   auto prompt = t->render(ctx);                       // per request, from any thread
//   if (!prompt) ...  // "TemplateError: System role not supported" (raise_exception), or
//                     // "UndefinedError at 5:9: 'x' is undefined", a resource limit, ...
//
// Templates come from model files and contexts from requests: both are untrusted. Every failure
// (syntax, run-time error, step/output/recursion limits) is an Error value; nothing aborts,
// throws out of render(), or runs unbounded.
#pragma once

#include <cstddef>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "util/result.h"

namespace cadenza::tmpl {

struct Program;  // the parsed syntax tree (ast.h)

struct RenderOptions {
  // strftime_now(fmt) as templates call it: the current local time formatted with C strftime.
  // Empty: the real clock. Tests and reproducible renders set a fixed one (fixed_clock()).
  std::function<std::string(std::string_view fmt)> strftime_now;
  // The rendered prompt, and any string or list the template builds, stays below this.
  size_t max_output_bytes = size_t{16} << 20;
  // Work budget: one step per statement, expression node, loop iteration and container item
  // handled, and one per KiB of string built or searched (roughly 50-100 ns each). Real chat
  // templates use tens of steps per message; the default stops a runaway template within about
  // a second.
  size_t max_steps = 10'000'000;
  // Macro call nesting (recursive macros), as Python's recursion limit bounds Jinja2.
  size_t max_call_depth = 100;
  // Native stack the interpreter may use below render()'s frame. The calling thread needs at
  // least this much plus a margin (default threads have 8 MiB).
  size_t max_stack_bytes = size_t{1} << 20;
};

// A strftime_now for a fixed moment (local fields as given): what tests use to pin the date.
std::function<std::string(std::string_view)> fixed_clock(int year, int month, int day, int hour = 0,
                                                          int minute = 0, int second = 0);
// C strftime of `tm` with a bounded output size (the formatting strftime_now uses).
std::string format_time(const std::tm& tm, std::string_view fmt);

// A parsed template. Cheap to copy (shares the immutable syntax tree); render() is const and
// safe to call from many threads at once.
class Template {
 public:
  // Syntax errors: "TemplateSyntaxError at LINE:COL: message".
  static Result<Template> parse(std::string_view source);

  // Renders with `context` as the template's variables (must be a JSON object). Beside the
  // context, templates see Jinja2's globals (range, dict, namespace, cycler, joiner) and Hugging
  // Face's raise_exception(msg) and strftime_now(fmt); context keys shadow them.
  Result<std::string> render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

// The ChatML template, for models that ship none: <|im_start|>role\ncontent<|im_end|>\n per
// message, then <|im_start|>assistant\n when add_generation_prompt is true.
std::string_view chatml_template();

}  // namespace cadenza::tmpl
