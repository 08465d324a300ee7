// The prefix cache as the API shows it: usage.prompt_tokens_details.cached_tokens on completions
// and chat completions (and the Responses / Messages spellings), a prompt evicted from a small KV
// pool served back from the host-memory tier with the same text, the cadenza_kv_tier_* metrics,
// and POST /v1/cache/clear (tiers, bad input, the API key).
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "running_server.h"
#include "test_client.h"

namespace cadenza::server {
namespace {

using nlohmann::json;
using testing::expect_error_shape;
using testing::metric_value;
using testing::Options;

// Byte tokens: BOS + one token per character. 600 characters: 601 tokens, 37 full blocks cacheable
// ((601 - 1) / 16).
std::string text_of(char seed) {
  std::string s;
  for (int i = 0; i < 600; ++i) s += static_cast<char>('a' + (seed * 7 + i * 13 + i / 5) % 26);
  return s;
}
constexpr int kCacheable = 37 * 16;

json completion(uint16_t port, const std::string& prompt) {
  const auto r = testing::post(port, "/v1/completions",
                               {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 4},
                                {"temperature", 0}, {"ignore_eos", true}});
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body, nullptr, false);
}
int cached(const json& j) { return j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(); }

Options tiered() {
  Options o;
  o.num_kv_blocks = 80;  // room for two of these prompts
  o.kv_tiers.memory_bytes = int64_t{256} << 20;
  return o;
}

TEST(KvCacheServer, CachedTokensReportedAndEvictedPromptComesBackFromMemory) {
  auto s = testing::start(tiered());
  ASSERT_NE(s, nullptr);
  const json first = completion(s->port, text_of(1));
  EXPECT_EQ(cached(first), 0);
  EXPECT_EQ(cached(completion(s->port, text_of(1))), kCacheable);
  for (char c = 2; c <= 5; ++c) completion(s->port, text_of(c));  // pushes prompt 1 out of the pool
  const json again = completion(s->port, text_of(1));
  EXPECT_EQ(cached(again), kCacheable);
  EXPECT_EQ(again["choices"][0]["text"], first["choices"][0]["text"]);

  const std::string m = testing::get(s->port, "/metrics").body;
  EXPECT_GE(metric_value(m, "cadenza_kv_tier_promotions_total{tier=\"memory\"}"), 37);
  EXPECT_GT(metric_value(m, "cadenza_kv_tier_demotions_total{tier=\"memory\"}"), 0);
  EXPECT_EQ(metric_value(m, "cadenza_kv_tier_capacity_bytes{tier=\"memory\"}"), 256.0 * (1 << 20));
  EXPECT_GT(metric_value(m, "cadenza_kv_tier_bytes{tier=\"memory\"}"), 0);

  // Chat completions report it too (the second identical conversation hits).
  const json chat = {{"model", "tiny"},
                     {"messages", {{{"role", "user"}, {"content", text_of(9)}}}},
                     {"max_tokens", 2}, {"temperature", 0}};
  ASSERT_EQ(testing::post(s->port, "/v1/chat/completions", chat).status, 200);
  const auto r = testing::post(s->port, "/v1/chat/completions", chat);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_GT(cached(j), 500);
  EXPECT_LT(cached(j), j["usage"]["prompt_tokens"].get<int>());
  // ... and the Anthropic Messages shape as cache_read_input_tokens (input_tokens: the rest).
  const json msg = {{"model", "tiny"}, {"max_tokens", 2},
                    {"messages", {{{"role", "user"}, {"content", text_of(9)}}}}};
  const auto a = testing::post(s->port, "/v1/messages", msg);
  ASSERT_EQ(a.status, 200) << a.body;
  const json aj = json::parse(a.body);
  EXPECT_GT(aj["usage"]["cache_read_input_tokens"].get<int>(), 500);
}

TEST(KvCacheServer, CacheClearDropsTiersAndChecksInput) {
  auto s = testing::start(tiered());
  ASSERT_NE(s, nullptr);
  for (char c = 1; c <= 4; ++c) completion(s->port, text_of(c));
  auto r = testing::post(s->port, "/v1/cache/clear", {{"tier", "memory"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["tier"], "memory");
  EXPECT_GT(j["freed"]["memory_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(j["freed"]["pool_blocks"], 0);
  // The pool still has prompt 4.
  EXPECT_EQ(cached(completion(s->port, text_of(4))), kCacheable);
  r = testing::post(s->port, "/v1/cache/clear", json::object());
  ASSERT_EQ(r.status, 200) << r.body;
  j = json::parse(r.body);
  EXPECT_EQ(j["tier"], "all");
  EXPECT_GT(j["freed"]["pool_blocks"].get<int64_t>(), 0);
  EXPECT_EQ(cached(completion(s->port, text_of(4))), 0);
  EXPECT_EQ(metric_value(testing::get(s->port, "/metrics").body, "cadenza_kv_tier_bytes{tier=\"memory\"}"), 0);

  expect_error_shape(testing::post(s->port, "/v1/cache/clear", {{"tier", "gpu"}}), 400);
  expect_error_shape(testing::post(s->port, "/v1/cache/clear", {{"tier", 3}}), 400);
  expect_error_shape(testing::post(s->port, "/v1/cache/clear", {{"bogus", true}}), 400);
  expect_error_shape(testing::get(s->port, "/v1/cache/clear"), 405);
}

TEST(KvCacheServer, CacheClearNeedsTheApiKey) {
  Options o;
  o.keys = {"sekrit"};
  auto s = testing::start(o);
  ASSERT_NE(s, nullptr);
  expect_error_shape(testing::post(s->port, "/v1/cache/clear", json::object()), 401);
  const auto r = testing::post(s->port, "/v1/cache/clear", json::object(),
                               {{"Authorization", "Bearer sekrit"}});
  EXPECT_EQ(r.status, 200) << r.body;
}

}  // namespace
}  // namespace cadenza::server
