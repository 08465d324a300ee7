// Per-request deadlines (`serve --request-timeout`, the X-Request-Timeout header): a generation
// still running at its deadline is aborted in the engine (its KV blocks come back) and answered
// 504 in the API's error shape, or, once its stream started, ends with an error event and
// [DONE]; a request that finishes in time is untouched; bad values are clear errors.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "running_server.h"
#include "synth/synth.h"
#include "test_client.h"
#include "test_models.h"

namespace cadenza::server {
namespace {

using nlohmann::json;
using testing::expect_error_shape;
using testing::metric_value;
using testing::Options;
using testing::sse_data;
using testing::wait_metric;
using Clock = std::chrono::steady_clock;

// The tiny model writes its whole context in a fraction of a second; these tests need a
// generation that runs for several seconds (testing::slow_model_path).
constexpr int32_t kModelLen = testing::kSlowModelLen;
using testing::slow_model_path;

Options slow_options() {
  Options o;
  o.model_path = slow_model_path();
  o.max_model_len = kModelLen;
  return o;
}

json long_request(bool stream) {
  return {{"prompt", "Tell a very long story"},
          {"max_tokens", kModelLen - 256},
          {"ignore_eos", true},
          {"stream", stream}};
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double aborts(uint16_t port) {
  return metric_value(testing::get(port, "/metrics").body,
                      "cadenza_request_success_total{finished_reason=\"abort\"}");
}

// The engine holds nothing once the aborted request is gone.
void expect_idle(uint16_t port, double aborts_before) {
  EXPECT_TRUE(wait_metric(port, "cadenza_request_success_total{finished_reason=\"abort\"}",
                          aborts_before + 1));
  EXPECT_TRUE(wait_metric(port, "cadenza_kv_cache_usage_ratio", 0));
  EXPECT_TRUE(wait_metric(port, "cadenza_num_requests_running", 0));
  EXPECT_TRUE(wait_metric(port, "cadenza_num_requests_waiting", 0));
}

class RequestTimeout : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Options o = slow_options();
    o.request_timeout_s = 1;
    shared_ = testing::start(o).release();
  }
  static void TearDownTestSuite() {
    delete shared_;
    shared_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(shared_, nullptr); }
  static uint16_t port() { return shared_->port; }
  static inline testing::Running* shared_ = nullptr;
};

TEST_F(RequestTimeout, NonStreamedGets504AndFreesKv) {
  const double before = aborts(port());
  const auto t0 = Clock::now();
  auto r = testing::post(port(), "/v1/completions", long_request(false));
  const double took = seconds_since(t0);
  expect_error_shape(r, 504);
  EXPECT_EQ(r.json()["error"]["code"], "request_timeout") << r.body;
  EXPECT_GE(took, 0.9);
  EXPECT_LT(took, 10.0);  // generous: the abort lands within a step or two
  expect_idle(port(), before);
}

TEST_F(RequestTimeout, StreamEndsWithErrorEventAndDone) {
  const double before = aborts(port());
  auto r = testing::post(port(), "/v1/completions", long_request(true));
  ASSERT_EQ(r.status, 200) << r.body;  // the stream had started
  const auto events = sse_data(r.body);
  ASSERT_GE(events.size(), 3u) << r.body;  // some tokens, the error, [DONE]
  EXPECT_EQ(events.back(), "[DONE]");
  const json err = json::parse(events[events.size() - 2], nullptr, false);
  ASSERT_TRUE(err.contains("error")) << events[events.size() - 2];
  EXPECT_EQ(err["error"]["code"], "request_timeout");
  EXPECT_EQ(r.body.find("\"finish_reason\":\"length\""), std::string::npos);
  expect_idle(port(), before);
}

TEST_F(RequestTimeout, ChatShapeToo) {
  const double before = aborts(port());
  json req = long_request(false);
  req.erase("prompt");
  req["messages"] = json::array({{{"role", "user"}, {"content", "Tell a very long story"}}});
  auto r = testing::post(port(), "/v1/chat/completions", req);
  expect_error_shape(r, 504);
  expect_idle(port(), before);
}

TEST_F(RequestTimeout, RequestWithinTheDeadlineIsUntouched) {
  for (bool stream : {false, true}) {
    auto r = testing::post(port(), "/v1/completions",
                           {{"prompt", "Hi"}, {"max_tokens", 8}, {"stream", stream}});
    ASSERT_EQ(r.status, 200) << r.body;
    if (stream) {
      EXPECT_EQ(sse_data(r.body).back(), "[DONE]");
      EXPECT_EQ(r.body.find("\"error\""), std::string::npos) << r.body;
    } else {
      EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "length") << r.body;
    }
  }
}

TEST_F(RequestTimeout, HeaderCannotRaiseTheServersLimit) {
  const auto t0 = Clock::now();
  auto r = testing::post(port(), "/v1/completions", long_request(false),
                         {{"X-Request-Timeout", "3600"}});
  expect_error_shape(r, 504);
  EXPECT_LT(seconds_since(t0), 10.0);
}

TEST(RequestTimeoutHeader, LowersTheLimitAndBadValuesAre400) {
  Options o = slow_options();  // no --request-timeout: only the header limits
  auto s = testing::start(o);
  ASSERT_NE(s, nullptr);
  const double before = aborts(s->port);
  const auto t0 = Clock::now();
  auto r = testing::post(s->port, "/v1/completions", long_request(false),
                         {{"X-Request-Timeout", "0.5"}});
  expect_error_shape(r, 504);
  EXPECT_GE(seconds_since(t0), 0.45);
  expect_idle(s->port, before);
  for (const char* bad : {"0", "-1", "abc", "1s", "nan", "inf", ""}) {
    auto b = testing::post(s->port, "/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 2}},
                           {{"X-Request-Timeout", bad}});
    expect_error_shape(b, 400);
    EXPECT_EQ(b.json()["error"]["code"], "invalid_timeout") << bad << ": " << b.body;
  }
  EXPECT_EQ(testing::post(s->port, "/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 2}},
                          {{"X-Request-Timeout", "30"}})
                .status,
            200);
}

TEST(RequestTimeoutOption, BadValuesAreErrors) {
  for (double bad : {-1.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    Options o;
    o.request_timeout_s = bad;
    auto built = testing::build(o);
    ASSERT_FALSE(built) << bad;
    EXPECT_NE(built.error().find("--request-timeout"), std::string::npos) << built.error();
  }
}

}  // namespace
}  // namespace cadenza::server
