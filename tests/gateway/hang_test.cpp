// End-to-end test of a hung replica (SIGSTOP: it keeps its connections and accepts new ones,
// but never answers): the gateway's active checks find it hung (two time out in a row), and
// the requests already in flight to it give up and are retried on another replica instead of
// waiting for upstream_timeout_ms (Upstream::hung_epoch, UpstreamCall::watch_for_hang).
#include <signal.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gateway_test_util.h"
#include "replica_process.h"
#include "test_client.h"

namespace cadenza::gateway {
namespace {

using nlohmann::json;
using server::testing::Client;
using server::testing::Response;
using server::testing::sse_data;
using testing::ReplicaProcess;
using testing::chat;
using testing::start_gateway;

// Whether the metrics text has a sample of `name` whose labels include all of `labels` (in any
// order) with a value above 0.
bool has_series(const std::string& text, const std::string& name,
                const std::vector<std::string>& labels) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + "{", 0) != 0) continue;
    bool all = true;
    for (const auto& l : labels) all = all && line.find(l) != std::string::npos;
    if (all && std::stod(line.substr(line.rfind(' ') + 1)) > 0) return true;
  }
  return false;
}

TEST(GatewayHang, RequestsInFlightToAStoppedReplicaAreRetriedElsewhereWithoutWaitingItOut) {
  auto a = ReplicaProcess::start("hang-a");
  auto b = ReplicaProcess::start("hang-b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // upstream_timeout_ms is long: without the hang watch, the requests sent to the stopped
  // replica would wait it out and then have no time left for a retry (503).
  auto gw = start_gateway(fmt::format(
      "models:\n  - name: tiny\n    upstreams: [{}, {}]\n"
      "health: {{interval_ms: 200, timeout_ms: 500, eject_after_failures: 2}}\n"
      "routing: {{prefix_affinity_chars: 0, max_retries: 2}}\n"
      "upstream_timeout_ms: 20000\ncache: {{backend: off}}\naccess_log: false\n",
      a->address(), b->address()));
  ASSERT_NE(gw, nullptr);
  const uint16_t port = gw->ports()[0];

  ASSERT_TRUE(a->stop_and_wait());
  // Sent at once, before the check notices: ties rotate, so some go to the stopped replica.
  constexpr int kRequests = 6;
  std::vector<Response> got(kRequests);
  std::vector<double> seconds(kRequests);
  std::vector<std::thread> ts;
  for (int i = 0; i < kRequests; ++i) {
    ts.emplace_back([&, i] {
      json body = chat("sys", fmt::format("request {}", i), 8);
      if (i % 2) body["stream"] = true;  // not started yet: retried like the others
      const auto t0 = std::chrono::steady_clock::now();
      got[i] = Client(port).post("/v1/chat/completions", body);
      seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  }
  for (auto& t : ts) t.join();
  a->signal(SIGCONT);

  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(got[i].status, 200) << "request " << i << ": " << got[i].body;
    // Two checks in a row (every 200 ms, 500 ms to answer) time out within ~1 s; the watch
    // polls every 200 ms. 10 s is slack for a loaded machine, far below the 20 s limit.
    EXPECT_LT(seconds[i], 10.0) << "request " << i;
    if (i % 2) {
      const auto events = sse_data(got[i].body);
      EXPECT_TRUE(!events.empty() && events.back() == "[DONE]") << got[i].body;
      EXPECT_EQ(got[i].body.find("\"error\""), std::string::npos) << got[i].body;
    }
    EXPECT_EQ(got[i].header("x-cadenza-upstream"), b->address()) << "request " << i;
  }
  // Some really went to the stopped replica: they ended as timeouts there and were retried.
  const std::string m = gw->metrics().render();
  EXPECT_TRUE(has_series(m, "cadenza_gateway_upstream_requests_total",
                         {"upstream=\"" + a->address() + "\"", "outcome=\"timeout\""}))
      << m;
  EXPECT_TRUE(has_series(m, "cadenza_gateway_retries_total", {"upstream=\"" + b->address() + "\""}))
      << m;
}

}  // namespace
}  // namespace cadenza::gateway
