// Helpers shared by the gateway's end-to-end test files (e2e_test.cpp, security_test.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gateway/gateway.h"

namespace cadenza::gateway::testing {

using nlohmann::json;

// Starts a gateway for `yaml`; without listeners in it, on 127.0.0.1 and a free port.
inline std::unique_ptr<Gateway> start_gateway(const std::string& yaml, std::string path = {},
                                              DnsLookup dns_lookup = {}) {
  const std::string text = yaml.find("listeners:") == std::string::npos
                               ? "listeners: [{host: 127.0.0.1, port: 0}]\n" + yaml
                               : yaml;
  auto cfg = parse_config(text);
  EXPECT_TRUE(cfg.ok()) << cfg.error();
  if (!cfg) return nullptr;
  auto gw = Gateway::create(*cfg, std::move(path), std::move(dns_lookup));
  EXPECT_TRUE(gw.ok()) << gw.error();
  if (!gw) return nullptr;
  auto st = (*gw)->start();
  EXPECT_TRUE(st.ok()) << st.error();
  if (!st) return nullptr;
  return std::move(*gw);
}

inline json chat(const std::string& system, const std::string& user, int max_tokens = 4) {
  return {{"model", "tiny"},
          {"max_tokens", max_tokens},
          {"temperature", 0.8},
          {"messages",
           {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}}}};
}

// Polls `done` every 10 ms until it holds or `timeout` passes; whether it held. The default is
// generous: the gateway and its replicas may run under ASan on a loaded 2-core machine, and every
// caller waits for something that must happen (a deadline that passes is a failure).
template <typename F>
bool eventually(F done, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace cadenza::gateway::testing
