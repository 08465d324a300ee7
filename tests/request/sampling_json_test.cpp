// The shared JSON reader of request parameters (server and `cadenza generate`): field names,
// types, ranges, defaults kept for absent fields, and errors that name the field.
#include "request/sampling_json.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace cadenza {
namespace {

using nlohmann::json;

TEST(SamplingJson, ReadsEveryFieldAndKeepsDefaultsForAbsentOnes) {
  const json body = {{"max_tokens", 7},        {"temperature", 0.5},      {"top_p", 0.9},
                     {"min_p", 0.1},           {"top_k", 20},             {"seed", -3},
                     {"stop", {"a", "b"}},     {"stop_token_ids", {4, 5}}, {"ignore_eos", true},
                     {"presence_penalty", 1},  {"frequency_penalty", -1}, {"repetition_penalty", 1.5},
                     {"logit_bias", {{"65", 2.5}}}, {"min_tokens", 2}, {"speculative", false}};
  SamplingParams p;
  SamplingFieldsGiven given;
  ASSERT_FALSE(read_sampling_params(body, p, &given));
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_FLOAT_EQ(p.temperature, 0.5f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_FLOAT_EQ(p.min_p, 0.1f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_EQ(p.seed, static_cast<uint64_t>(int64_t{-3}));
  EXPECT_EQ(p.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_FLOAT_EQ(p.presence_penalty, 1.0f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -1.0f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.5f);
  EXPECT_EQ(p.logit_bias, (std::map<int32_t, float>{{65, 2.5f}}));
  EXPECT_EQ(p.min_tokens, 2);
  EXPECT_FALSE(p.speculative);
  EXPECT_TRUE(given.max_tokens);
  EXPECT_TRUE(given.seed);
  for (const auto& [key, value] : body.items()) EXPECT_TRUE(is_sampling_field(key)) << key;
  EXPECT_FALSE(is_sampling_field("prompt"));
  EXPECT_FALSE(is_sampling_field("n"));

  SamplingParams d;
  d.temperature = 0.25f;
  SamplingFieldsGiven none;
  ASSERT_FALSE(read_sampling_params({{"top_k", nullptr}, {"other", 1}}, d, &none));
  EXPECT_FLOAT_EQ(d.temperature, 0.25f);
  EXPECT_EQ(d.top_k, SamplingParams{}.top_k);  // null is absent
  EXPECT_FALSE(none.max_tokens);
  EXPECT_FALSE(none.seed);
}

TEST(SamplingJson, MaxCompletionTokensWinsAndEmptyStopMeansNone) {
  SamplingParams p;
  ASSERT_FALSE(read_sampling_params({{"max_tokens", 3}, {"max_completion_tokens", 5}}, p));
  EXPECT_EQ(p.max_tokens, 5);
  p.stop = {"x"};
  ASSERT_FALSE(read_sampling_params({{"stop", ""}}, p));
  EXPECT_TRUE(p.stop.empty());
  // An empty string in a list is kept: validate_request rejects it (it would match everywhere).
  ASSERT_FALSE(read_sampling_params({{"stop", {""}}}, p));
  EXPECT_EQ(p.stop, std::vector<std::string>{""});
}

TEST(SamplingJson, WrongTypesAndRangesNameTheField) {
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"max_tokens", 0}}, "max_tokens"},
      {{{"max_tokens", "8"}}, "max_tokens"},
      {{{"max_completion_tokens", 1.5}}, "max_completion_tokens"},
      {{{"temperature", 2.5}}, "temperature"},
      {{{"temperature", "hot"}}, "temperature"},
      {{{"top_p", -0.1}}, "top_p"},
      {{{"min_p", 2}}, "min_p"},
      {{{"top_k", -2}}, "top_k"},
      {{{"seed", 1e30}}, "seed"},
      {{{"seed", 18446744073709551615ull}}, "seed"},
      {{{"stop", 3}}, "stop"},
      {{{"stop", {"a", 1}}}, "stop"},
      {{{"stop", std::vector<std::string>(17, "s")}}, "stop"},
      {{{"stop_token_ids", {-1}}}, "stop_token_ids"},
      {{{"stop_token_ids", "1"}}, "stop_token_ids"},
      {{{"ignore_eos", 1}}, "ignore_eos"},
      {{{"speculative", "no"}}, "speculative"},
      {{{"presence_penalty", 2.5}}, "presence_penalty"},
      {{{"frequency_penalty", -3}}, "frequency_penalty"},
      {{{"repetition_penalty", 101}}, "repetition_penalty"},
      {{{"logit_bias", {1, 2}}}, "logit_bias"},
      {{{"logit_bias", {{"abc", 1}}}}, "logit_bias"},
      {{{"logit_bias", {{"-1", 1}}}}, "logit_bias"},
      {{{"logit_bias", {{"99999999999", 1}}}}, "logit_bias"},
      {{{"logit_bias", {{"5", 200}}}}, "logit_bias"},
      {{{"logit_bias", {{"5", "x"}}}}, "logit_bias"},
      {{{"min_tokens", -1}}, "min_tokens"},
  };
  for (const auto& [body, param] : bad) {
    SamplingParams p;
    const auto e = read_sampling_params(body, p);
    ASSERT_TRUE(e) << body.dump();
    EXPECT_EQ(e->param, param) << body.dump();
    EXPECT_NE(e->message.find("'" + param + "'"), std::string::npos) << e->message;
  }
}

TEST(SamplingJson, TokenIds) {
  std::vector<int32_t> ids;
  EXPECT_FALSE(read_token_ids(json::array(), "t", ids, true));
  EXPECT_TRUE(read_token_ids(json::array(), "t", ids, false));
  EXPECT_TRUE(read_token_ids(json{1, 2147483648ll}, "t", ids, true));
  EXPECT_TRUE(read_token_ids(json{1, 2.5}, "t", ids, true));
  ASSERT_FALSE(read_token_ids(json{0, 2147483647}, "t", ids, false));
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 2147483647}));
}

}  // namespace
}  // namespace cadenza
