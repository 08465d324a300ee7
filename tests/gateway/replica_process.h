// Test helpers: real `cadenza serve` replicas as child processes on ephemeral ports, over one
// tiny synthesized model (tests/test_models.h) written once per test process.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

namespace cadenza::gateway::testing {

// The cadenza binary: $CADENZA_SERVE_BIN when set, else the one built with the tests.
std::string cadenza_binary();
// The tiny model file (removed at process exit).
std::string tiny_model_path();

class ReplicaProcess {
 public:
  // Starts `cadenza serve` on 127.0.0.1, port 0, and waits (at most 60 s) for its "listening
  // on" line and then for /ready. Null on failure (with a gtest failure recorded).
  static std::unique_ptr<ReplicaProcess> start(const std::string& name);
  ~ReplicaProcess();
  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void kill();  // SIGKILL and reap
  bool alive() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

// A port that was free a moment ago (for programs that cannot take port 0).
uint16_t free_port();

}  // namespace cadenza::gateway::testing
