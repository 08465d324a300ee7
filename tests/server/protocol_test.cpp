// The OpenAI request parser on its own: parameter validation, and a fuzz-style run over random
// and mutated JSON bodies (never a crash or an exception; always a value or an ApiError 4xx).
#include "server/openai_protocol.h"

#include <random>

#include <gtest/gtest.h>

#include "server/auth.h"

namespace cadenza::server {
namespace {

using nlohmann::json;

TEST(Protocol, CompletionDefaultsAndValues) {
  auto p = parse_completion_request(
      {{"prompt", "hi"}, {"max_tokens", 7}, {"temperature", 0.5}, {"top_p", 0.9}, {"top_k", 20},
       {"min_p", 0.1}, {"seed", -3}, {"stop", "x"}, {"n", 2}, {"ignore_eos", true}},
      Endpoint::kCompletions);
  ASSERT_FALSE(p.error) << p.error->message;
  const auto& r = p.request;
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_TRUE(r.given.max_tokens);
  EXPECT_EQ(r.sampling.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 20);
  EXPECT_TRUE(r.given.seed);
  EXPECT_EQ(r.sampling.seed, static_cast<uint64_t>(int64_t{-3}));
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.sampling.ignore_eos);
  auto d = parse_completion_request({{"prompt", {1, 2, 3}}}, Endpoint::kCompletions);
  ASSERT_FALSE(d.error);
  EXPECT_TRUE(d.request.prompt_is_tokens);
  EXPECT_EQ(d.request.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FLOAT_EQ(d.request.sampling.temperature, 1.0f);  // OpenAI's defaults
  EXPECT_FLOAT_EQ(d.request.sampling.top_p, 1.0f);
  EXPECT_EQ(d.request.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(d.request.sampling.min_p, 0.0f);
  EXPECT_FALSE(d.request.given.max_tokens);
  EXPECT_FALSE(d.request.given.seed);
}

TEST(Protocol, Rejections) {
  const json bad[] = {
      {{"prompt", "x"}, {"temperature", -1}},       {{"prompt", "x"}, {"temperature", "hot"}},
      {{"prompt", "x"}, {"top_p", -0.5}},           {{"prompt", "x"}, {"min_p", 2}},
      {{"prompt", "x"}, {"n", 0}},                  {{"prompt", "x"}, {"n", 1.5}},
      {{"prompt", "x"}, {"max_tokens", -1}},        {{"prompt", "x"}, {"stop", 3}},
      {{"prompt", "x"}, {"stream", "yes"}},         {{"prompt", {-1}}},
      {{"prompt", {"a", "b"}}},                     {{"prompt", "x"}, {"echo", true}},
      {{"prompt", "x"}, {"best_of", 2}},            {{"prompt", "x"}, {"logprobs", 50}},
      {{"prompt", "x"}, {"frequency_penalty", 3}},  {{"prompt", "x"}, {"suffix", "s"}},
      {{"prompt", "x"}, {"seed", 1e30}},            {{"max_tokens", 3}},
      {{"prompt", "x"}, {"logit_bias", {{"a", 1}}}}, {{"prompt", "x"}, {"logit_bias", {{"5", 200}}}},
      {{"prompt", "x"}, {"repetition_penalty", -1}}, {{"prompt", "x"}, {"min_tokens", -1}},
  };
  for (const auto& b : bad) {
    auto p = parse_completion_request(b, Endpoint::kCompletions);
    EXPECT_TRUE(p.error) << b.dump();
    if (p.error) {
      EXPECT_EQ(p.error->status, 400);
    }
  }
  auto chat = parse_completion_request({{"messages", {{{"role", "user"}, {"content", 5}}}}},
                                       Endpoint::kChat);
  EXPECT_TRUE(chat.error);
  auto image = parse_completion_request(
      {{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}, Endpoint::kChat);
  ASSERT_TRUE(image.error);  // an image_url part without its URL
  EXPECT_NE(image.error->message.find("image_url.url"), std::string::npos) << image.error->message;
  // Other part types are not supported; image URLs are collected in order, markers in the text.
  auto audio = parse_completion_request(
      {{"messages", {{{"role", "user"}, {"content", {{{"type", "input_audio"}}}}}}}}, Endpoint::kChat);
  ASSERT_TRUE(audio.error);
  EXPECT_NE(audio.error->message.find("not supported"), std::string::npos);
  auto two = parse_completion_request(
      {{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", "u1"}}}},
                                                     {{"type", "text"}, {"text", "t"}},
                                                     {{"type", "image_url"}, {"image_url", "u2"}}}}}}}},
      Endpoint::kChat);
  ASSERT_FALSE(two.error) << two.error->message;
  EXPECT_EQ(two.request.image_urls, (std::vector<std::string>{"u1", "u2"}));
  EXPECT_EQ(two.request.messages[0]["content"],
            std::string(kImageMarker) + "t" + std::string(kImageMarker));
}

TEST(Protocol, ErrorBodyShape) {
  json b = error_body(bad_request("nope", "temperature"));
  EXPECT_EQ(b["error"]["message"], "nope");
  EXPECT_EQ(b["error"]["type"], "invalid_request_error");
  EXPECT_EQ(b["error"]["param"], "temperature");
  EXPECT_TRUE(b["error"]["code"].is_null());
}

TEST(Auth, ConstantTimeCompareAndBearer) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  ApiKeys none;
  EXPECT_TRUE(none.check(""));
  ApiKeys keys({"k1", "k2"});
  EXPECT_TRUE(keys.check("Bearer k1"));
  EXPECT_TRUE(keys.check("bearer k2"));
  EXPECT_FALSE(keys.check("Bearer k3"));
  EXPECT_FALSE(keys.check("k1"));
  EXPECT_FALSE(keys.check(""));
}

// Random JSON values, nested a little.
json random_value(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth > 2 ? 5 : 7);
  switch (kind(rng)) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int64_t>(rng()) - (1ll << 31);
    case 3: return std::uniform_real_distribution<double>(-1e6, 1e6)(rng);
    case 4: {
      std::string s(rng() % 12, 'a');
      for (char& c : s) c = static_cast<char>(rng() % 95 + 32);
      return s;
    }
    case 5: return static_cast<uint64_t>(rng()) << 32 | rng();
    case 6: {
      json a = json::array();
      for (unsigned i = rng() % 4; i > 0; --i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (unsigned i = rng() % 4; i > 0; --i) o[std::to_string(rng() % 5)] = random_value(rng, depth + 1);
      return o;
    }
  }
}

TEST(ProtocolFuzz, MutatedBodiesNeverCrash) {
  const char* keys[] = {"prompt", "messages", "max_tokens", "max_completion_tokens", "temperature",
                        "top_p", "top_k", "min_p", "seed", "stop", "n", "stream",
                        "stream_options", "logprobs", "top_logprobs", "logit_bias",
                        "presence_penalty", "frequency_penalty", "echo", "best_of", "user",
                        "ignore_eos", "model", "tools", "response_format", "suffix"};
  const json base_completion = {{"prompt", "hello"}, {"max_tokens", 4}, {"stream", true},
                                {"stop", {"a"}}, {"n", 2}, {"seed", 1}};
  const json base_chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}};
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const bool chat = iter % 2 == 1;
    json body = chat ? base_chat : base_completion;
    for (unsigned m = rng() % 4 + 1; m > 0; --m) {
      const char* key = keys[rng() % std::size(keys)];
      if (rng() % 4 == 0) body.erase(key);
      else body[key] = random_value(rng, 0);
    }
    if (iter % 97 == 0) body = random_value(rng, 0);
    ParsedCompletion p;
    EXPECT_NO_THROW(p = parse_completion_request(body, chat ? Endpoint::kChat : Endpoint::kCompletions))
        << body.dump();
    if (p.error) {
      EXPECT_GE(p.error->status, 400);
      EXPECT_LT(p.error->status, 500);
      EXPECT_FALSE(p.error->message.empty());
    } else {
      ++accepted;
    }
    // Text-level mutation of the serialized body: the JSON decoder must never throw.
    std::string text = body.dump();
    if (!text.empty()) text[rng() % text.size()] = static_cast<char>(rng() % 256);
    json decoded;
    EXPECT_NO_THROW((void)parse_json_object(text, decoded));
    EXPECT_NO_THROW((void)parse_tokenize_request(body.is_object() ? body : json::object()));
    EXPECT_NO_THROW((void)parse_detokenize_request(body.is_object() ? body : json::object()));
  }
  EXPECT_GT(accepted, 100);
}

}  // namespace
}  // namespace cadenza::server

namespace cadenza::server {
namespace {

// Regression: a body of deeply nested arrays parsed fine (nlohmann's parser is iterative) but
// every later dump/copy/render recursed once per level, so a few MiB of '[' in an unknown message
// field overflowed the I/O thread's stack. Bodies nesting deeper than kMaxJsonDepth are a 400.
TEST(Protocol, DeeplyNestedBodiesAreA400) {
  auto body_with_depth = [](int levels) {
    return std::string(R"({"messages":[{"role":"user","content":"x","extra":)") +
           std::string(static_cast<size_t>(levels), '[') +
           std::string(static_cast<size_t>(levels), ']') + "}]}";
  };
  json j;
  auto e = parse_json_object(body_with_depth(1'000'000), j);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find("nests deeper"), std::string::npos) << e->message;

  // Right at the limit: accepted, normalized and serializable (3 levels are the body's own).
  ASSERT_FALSE(parse_json_object(body_with_depth(kMaxJsonDepth - 3), j));
  auto p = parse_completion_request(j, Endpoint::kChat);
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_FALSE(p.request.messages.dump().empty());
  EXPECT_TRUE(parse_json_object(body_with_depth(kMaxJsonDepth - 2), j));

  // Brackets inside strings (escaped quotes included) do not count.
  const std::string deep_string = R"({"prompt":"\")" + std::string(10'000, '[') + R"("})";
  EXPECT_FALSE(json_nesting_exceeds(deep_string, 4));
  EXPECT_FALSE(parse_json_object(deep_string, j));
  EXPECT_TRUE(json_nesting_exceeds("[[[", 2));
  EXPECT_FALSE(json_nesting_exceeds("[[]][[]]", 2));
}

}  // namespace
}  // namespace cadenza::server
