// TMPL_TRY / TMPL_CHECK: propagate the Error of a Result or Status to the caller, the way the
// template code returns failures everywhere (no exceptions).
//
//   TMPL_TRY(v, eval(expr));   // declares `v` as the value, or returns the error
//   TMPL_CHECK(charge(1));     // returns the error of a failed Status/Result
#pragma once

#include <utility>

#define TMPL_TRY(var, expr)                        \
  auto var##_res = (expr);                         \
  if (!var##_res) return var##_res.error_value();  \
  auto var = std::move(*var##_res)

#define TMPL_CHECK(expr)                 \
  do {                                   \
    auto st_ = (expr);                   \
    if (!st_) return st_.error_value();  \
  } while (0)
