#include "replica_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "synth/synth.h"
#include "test_client.h"
#include "test_models.h"

extern char** environ;

namespace cadenza::gateway::testing {

namespace {

struct RemoveAtExit {
  std::string path;
  ~RemoveAtExit() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove(path, ec);
  }
};

}  // namespace

std::string cadenza_binary() {
  if (const char* b = std::getenv("CADENZA_SERVE_BIN"); b && *b) return b;
  return CADENZA_BIN;
}

std::string tiny_model_path() {
  static RemoveAtExit remover;
  static const std::string path = [] {
    synth::SynthOptions opts = test::tiny_model_options(11);
    opts.shape.n_ctx = 2048;
    remover.path = test::write_temp_model(opts, "gateway-test");
    return remover.path;
  }();
  return path;
}

namespace {

struct Spawned {
  pid_t pid = -1;
  uint16_t port = 0;
  bool https = false;
};

// Starts `args` with stdout on a pipe and stderr to `log`, and waits until it prints
// "listening on http://IP:PORT". pid -1 when it could not start; port 0 when it never listened.
Spawned spawn_listening(std::vector<std::string> args, const std::string& log,
                        std::chrono::steady_clock::time_point deadline) {
  Spawned s;
  int out[2];
  if (pipe(out) != 0) return s;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int rc = posix_spawn(&s.pid, args[0].c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    s.pid = -1;
    return s;
  }
  std::string text;
  const std::regex re("listening on (https?)://[0-9.]+:([0-9]+)");
  std::smatch m;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[512];
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (std::regex_search(text, m, re)) {
      s.https = m[1] == "https";
      s.port = static_cast<uint16_t>(std::stoi(m[2]));
      break;
    }
  }
  close(out[0]);
  return s;
}

std::string log_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("gateway-test-" + std::to_string(::getpid()) + "-" + name + ".log"))
      .string();
}

void kill_and_reap(pid_t& pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  pid = -1;
}

}  // namespace

std::unique_ptr<ReplicaProcess> ReplicaProcess::start(const std::string& name,
                                                      const std::vector<std::string>& extra) {
  const std::string log = log_path(name);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<std::string> args = {cadenza_binary(), "serve", "-m", tiny_model_path(), "--host",
                                   "127.0.0.1", "--port", "0", "-t", "1", "--io-threads", "1",
                                   "--served-model-name", "tiny", "--max-model-len", "1024"};
  args.insert(args.end(), extra.begin(), extra.end());
  const Spawned s = spawn_listening(std::move(args), log, deadline);
  if (s.pid < 0) {
    ADD_FAILURE() << "cannot start " << cadenza_binary();
    return nullptr;
  }
  auto r = std::unique_ptr<ReplicaProcess>(new ReplicaProcess());
  r->pid_ = s.pid;
  r->port_ = s.port;
  if (r->port_ == 0) {
    ADD_FAILURE() << "replica " << name << " did not start; see " << log;
    return nullptr;
  }
  // An HTTPS replica is not probed here (the test's plain client cannot); the caller waits for
  // it through the gateway.
  if (s.https) return r;
  // It listens before its warm-up ends; requests before /ready says 200 would get 503.
  while (std::chrono::steady_clock::now() < deadline) {
    if (server::testing::get(r->port_, "/ready").status == 200) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "replica " << name << " never became ready; see " << log;
  return nullptr;
}

void ReplicaProcess::kill() { kill_and_reap(pid_); }

void ReplicaProcess::signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

bool ReplicaProcess::stop_and_wait() {
  if (pid_ <= 0) return false;
  ::kill(pid_, SIGSTOP);
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, WUNTRACED);
  } while (r < 0 && errno == EINTR);
  if (r == pid_ && WIFSTOPPED(status)) return true;
  if (r == pid_) pid_ = -1;  // it exited (and is reaped now): nothing left to kill
  return false;
}

ReplicaProcess::~ReplicaProcess() { kill(); }

std::unique_ptr<GatewayProcess> GatewayProcess::start(const std::string& config_path,
                                                      const std::string& name) {
  auto g = std::unique_ptr<GatewayProcess>(new GatewayProcess());
  g->log_ = log_path(name);
  const Spawned s =
      spawn_listening({cadenza_binary(), "gateway", "--config", config_path}, g->log_,
                      std::chrono::steady_clock::now() + std::chrono::seconds(30));
  g->pid_ = s.pid;
  g->port_ = s.port;
  if (g->pid_ < 0 || g->port_ == 0) {
    ADD_FAILURE() << "cadenza gateway did not start; see " << g->log_;
    return nullptr;  // the destructor kills what did start
  }
  return g;
}

GatewayProcess::~GatewayProcess() { kill_and_reap(pid_); }

void GatewayProcess::signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

bool GatewayProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == 0) return true;
  pid_ = -1;  // exited (and reaped)
  return false;
}

int GatewayProcess::wait_exit(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (pid_ > 0) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

uint16_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

}  // namespace cadenza::gateway::testing
