// validate_request: every rule rejects what it should, names its parameter, and lets the boundary
// values through. The engine and the server call this one function (their tests check that they
// pass its message on: tests/engine/engine_core_test.cpp, tests/server/server_test.cpp).
#include "request/validate_request.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace cadenza {
namespace {

constexpr RequestLimits kLimits{.n_vocab = 100, .max_model_len = 32};

SamplingParams valid() {
  SamplingParams p;
  p.max_tokens = 8;
  return p;
}

const std::vector<int32_t> kPrompt = {1, 2, 3};

TEST(ValidateRequest, AValidRequestPasses) {
  EXPECT_FALSE(validate_request(kPrompt, valid(), kLimits));
  // Boundaries: the whole context, every id of the vocabulary, the ranges' ends.
  SamplingParams p = valid();
  p.max_tokens = 29;
  p.temperature = 0;
  p.top_p = 1;
  p.min_p = 1;
  p.stop_token_ids = {0, 99};
  p.n = SamplingParams::kMaxN;
  p.logprobs = SamplingParams::kMaxLogprobs;
  p.logit_bias = {{0, -1e30f}, {99, 1e30f}};
  p.min_tokens = 29;
  EXPECT_FALSE(validate_request(std::vector<int32_t>{0, 50, 99}, p, kLimits));
  p.logprobs = -1;
  p.min_tokens = 0;
  EXPECT_FALSE(validate_request(kPrompt, p, kLimits));
}

struct Case {
  const char* what;
  std::vector<int32_t> prompt;
  std::function<void(SamplingParams&)> change;
  const char* param;
};

TEST(ValidateRequest, EachRuleNamesItsParameter) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Case> cases = {
      {"empty prompt", {}, [](SamplingParams&) {}, "prompt"},
      {"prompt id too large", {1, 100}, [](SamplingParams&) {}, "prompt"},
      {"negative prompt id", {-1}, [](SamplingParams&) {}, "prompt"},
      {"prompt fills the context", std::vector<int32_t>(32, 1), [](SamplingParams&) {}, "prompt"},
      {"max_tokens 0", kPrompt, [](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens"},
      {"over the context", kPrompt, [](SamplingParams& p) { p.max_tokens = 30; }, "max_tokens"},
      {"temperature < 0", kPrompt, [](SamplingParams& p) { p.temperature = -0.1f; }, "temperature"},
      {"temperature nan", kPrompt, [&](SamplingParams& p) { p.temperature = nan; }, "temperature"},
      {"top_p 0", kPrompt, [](SamplingParams& p) { p.top_p = 0; }, "top_p"},
      {"top_p > 1", kPrompt, [](SamplingParams& p) { p.top_p = 1.5f; }, "top_p"},
      {"min_p > 1", kPrompt, [](SamplingParams& p) { p.min_p = 2; }, "min_p"},
      {"empty stop", kPrompt, [](SamplingParams& p) { p.stop = {"a", ""}; }, "stop"},
      {"stop id", kPrompt, [](SamplingParams& p) { p.stop_token_ids = {100}; }, "stop_token_ids"},
      {"n 0", kPrompt, [](SamplingParams& p) { p.n = 0; }, "n"},
      {"n too large", kPrompt, [](SamplingParams& p) { p.n = SamplingParams::kMaxN + 1; }, "n"},
      {"logprobs", kPrompt, [](SamplingParams& p) { p.logprobs = 21; }, "logprobs"},
      {"bias id", kPrompt, [](SamplingParams& p) { p.logit_bias = {{100, 1}}; }, "logit_bias"},
      {"bias inf", kPrompt, [&](SamplingParams& p) { p.logit_bias = {{1, inf}}; }, "logit_bias"},
      {"repetition 0", kPrompt, [](SamplingParams& p) { p.repetition_penalty = 0; },
       "repetition_penalty"},
      {"presence inf", kPrompt, [&](SamplingParams& p) { p.presence_penalty = inf; },
       "presence_penalty"},
      {"frequency nan", kPrompt, [&](SamplingParams& p) { p.frequency_penalty = nan; },
       "frequency_penalty"},
      {"min_tokens > max_tokens", kPrompt, [](SamplingParams& p) { p.min_tokens = 9; }, "min_tokens"},
      {"min_tokens < 0", kPrompt, [](SamplingParams& p) { p.min_tokens = -1; }, "min_tokens"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    SamplingParams p = valid();
    c.change(p);
    const auto e = validate_request(c.prompt, p, kLimits);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->param, c.param);
    EXPECT_FALSE(e->message.empty());
  }
}

TEST(ValidateRequest, ContextErrorsUseOpenAIsWording) {
  SamplingParams p = valid();
  p.max_tokens = 30;
  const auto e = validate_request(kPrompt, p, kLimits);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message,
            "This model's maximum context length is 32 tokens. However, you requested 33 tokens "
            "(3 in the prompt, 30 for the completion). Please reduce the prompt or max_tokens.");
  const auto full = validate_request(std::vector<int32_t>(40, 1), valid(), kLimits);
  ASSERT_TRUE(full);
  EXPECT_NE(full->message.find("your prompt has 40 tokens"), std::string::npos) << full->message;
}

}  // namespace
}  // namespace cadenza
