// Request priorities over HTTP (`priority`, `cadenza serve --scheduling-policy`): refused under
// FCFS, honoured in the queue under the priority policy.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "running_server.h"
#include "test_client.h"

namespace cadenza::server {
namespace {

using nlohmann::json;
using testing::Client;
using testing::expect_error_shape;
using testing::Options;
using testing::start;
using testing::wait_metric;

// `priority` is a 400 unless the server schedules by priority (vLLM's rule), and must be an int32.
TEST(ServerPriority, RefusedUnderFcfsAndValidated) {
  auto s = start();
  ASSERT_NE(s, nullptr);
  const uint16_t p = s->port;
  auto r = testing::post(p, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"priority", 3}});
  expect_error_shape(r, 400);
  EXPECT_NE(r.body.find("--scheduling-policy priority"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"param\":\"priority\""), std::string::npos) << r.body;
  EXPECT_EQ(testing::post(p, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"priority", 0}})
                .status,
            200);
  for (const json& bad : {json("high"), json(1.5), json(int64_t{1} << 40)})
    expect_error_shape(
        testing::post(p, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"priority", bad}}),
        400);
}

// Under --scheduling-policy priority, a request queued later with a lower priority value runs
// before one queued earlier: one slot, held by a stream; L (priority 10) queues, then H (-5);
// the stream ends, and H must finish first (under FCFS, or with the field dropped, L would).
// L and H each ask for 1,500 tokens, so whichever runs second answers ~1,500 decode steps after
// the other (~50 ms at the tiny model's ~30 us a token, more under the sanitizers): the client
// threads' wake-up jitter cannot flip the order they observe, either way.
// The tiny model may finish the holder's 1,000 tokens before both have queued (a loaded
// machine); the order is only decided once the metrics show both waiting behind it, so an
// attempt where that never shows is started again rather than judged.
TEST(ServerPriority, LowerValueQueuedLaterRunsFirst) {
  Options o;
  o.max_num_seqs = 1;
  o.max_queue = 4;
  o.max_model_len = 2048;
  o.priority_scheduling = true;
  auto s = start(o);
  ASSERT_NE(s, nullptr);
  const uint16_t p = s->port;
  bool judged = false;
  for (int attempt = 0; attempt < 5 && !judged; ++attempt) {
    ASSERT_TRUE(wait_metric(p, "cadenza_num_requests_running", 0));
    Client holder(p);
    json req = {{"prompt", "Long"}, {"max_tokens", 1000}, {"stream", true}, {"ignore_eos", true}};
    const std::string body = req.dump();
    ASSERT_TRUE(holder.send_raw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body));
    ASSERT_NE(holder.read_some().find("200"), std::string::npos);

    std::mutex mu;
    std::vector<std::string> finished;
    auto post_with = [&](const std::string& name, int priority, int max_tokens) {
      return std::thread([&, name, priority, max_tokens] {
        auto r = testing::post(p, "/v1/completions",
                               {{"prompt", "q"},
                                {"max_tokens", max_tokens},
                                {"ignore_eos", true},
                                {"priority", priority}});
        EXPECT_EQ(r.status, 200) << r.body;
        std::lock_guard<std::mutex> lock(mu);
        finished.push_back(name);
      });
    };
    std::thread low = post_with("L", 10, 1500);
    const bool low_waits = wait_metric(p, "cadenza_num_requests_waiting", 1);
    std::thread high = post_with("H", -5, 1500);
    const bool both_wait = low_waits && wait_metric(p, "cadenza_num_requests_waiting", 2);
    holder.close();  // the stream's request is aborted; the slot frees
    low.join();
    high.join();
    if (!both_wait) continue;
    judged = true;
    ASSERT_EQ(finished.size(), 2u);
    EXPECT_EQ(finished[0], "H");
    EXPECT_EQ(finished[1], "L");
  }
  EXPECT_TRUE(judged) << "the holder finished before both requests queued in 5 attempts";
}

}  // namespace
}  // namespace cadenza::server
