// Test helpers: child processes on ephemeral ports: real `cadenza serve` replicas over one tiny
// synthesized model (tests/test_models.h) written once per test process, and `cadenza gateway`.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cadenza::gateway::testing {

// The cadenza binary: $CADENZA_SERVE_BIN when set, else the one built with the tests.
std::string cadenza_binary();
// The tiny model file (removed at process exit).
std::string tiny_model_path();

class ReplicaProcess {
 public:
  // Starts `cadenza serve` on 127.0.0.1, port 0, and waits (at most 60 s) for its "listening
  // on" line and then for /ready. Null on failure (with a gtest failure recorded).
  // `extra`: more `cadenza serve` arguments (e.g. {"--api-key", "K"}). A replica serving HTTPS
  // (--ssl-certfile) is returned once it listens, without waiting for /ready.
  static std::unique_ptr<ReplicaProcess> start(const std::string& name,
                                               const std::vector<std::string>& extra = {});
  ~ReplicaProcess();
  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void kill();  // SIGKILL and reap
  void signal(int sig) const;  // e.g. SIGCONT; no reaping
  // SIGSTOP, then waits until every thread has stopped (waitpid WUNTRACED). kill() returns
  // before that: the stop starts only when one of the replica's threads next runs, and on a
  // loaded machine its other threads can still answer a request in that window. False if the
  // process exited instead.
  bool stop_and_wait();
  bool alive() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

// `cadenza gateway --config PATH` as a child process (stderr to a log file), started once it
// printed its "listening on" line (at most 30 s; null and a gtest failure otherwise).
class GatewayProcess {
 public:
  static std::unique_ptr<GatewayProcess> start(const std::string& config_path,
                                               const std::string& name);
  ~GatewayProcess();
  uint16_t port() const { return port_; }
  void signal(int sig) const;
  // Waits (at most `timeout_ms`) for the process to exit; its exit status, or -1 if it did not.
  int wait_exit(int timeout_ms);
  bool running();
  const std::string& log() const { return log_; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::string log_;
};

// A port that was free a moment ago (for programs that cannot take port 0).
uint16_t free_port();

}  // namespace cadenza::gateway::testing
