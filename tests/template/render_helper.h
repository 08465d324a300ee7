// Helpers for the template tests: render a template against a small fixed context and compare
// with what Jinja2 3.1 (configured as Hugging Face transformers configures it) renders.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "template/template.h"

namespace cadenza::tmpl::test {

// The variables the inline test templates use.
inline const nlohmann::ordered_json& test_context() {
  static const auto ctx = nlohmann::ordered_json::parse(R"({
    "d": {"a": 1, "b": [1, 2]}, "s": "hi", "n": null, "l": [3, 1, 2],
    "msgs": [{"role": "user", "content": "Hi é"}, {"role": "assistant", "content": "Yo"}],
    "u": "héllo wörld", "f": 1.5, "t": true})");
  return ctx;
}

inline RenderOptions test_options() {
  RenderOptions o;
  o.strftime_now = fixed_clock(2026, 11, 29);
  return o;
}

// The rendering, or "ERROR: <message>" when parsing or rendering fails.
inline std::string render(std::string_view source, const nlohmann::ordered_json& ctx = test_context(),
                          const RenderOptions& options = test_options()) {
  auto t = Template::parse(source);
  if (!t) return "ERROR: " + t.error();
  auto r = t->render(ctx, options);
  if (!r) return "ERROR: " + r.error();
  return *r;
}

struct Case {
  const char* source;
  const char* expected;
};

// Each case rendered against test_context(); expected outputs were produced by Jinja2 3.1.6.
inline void expect_renders(const std::vector<Case>& cases) {
  for (const Case& c : cases) EXPECT_EQ(render(c.source), c.expected) << "template: " << c.source;
}

}  // namespace cadenza::tmpl::test
