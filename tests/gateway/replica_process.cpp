#include "replica_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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
    const std::string p = (std::filesystem::temp_directory_path() /
                           ("gateway-test-" + std::to_string(::getpid()) + ".gguf"))
                              .string();
    auto written = synth::write_synthetic_model(opts, p);
    EXPECT_TRUE(written.ok()) << written.error();
    remover.path = p;
    return p;
  }();
  return path;
}

std::unique_ptr<ReplicaProcess> ReplicaProcess::start(const std::string& name) {
  int out[2];
  if (pipe(out) != 0) {
    ADD_FAILURE() << "pipe failed";
    return nullptr;
  }
  const std::string bin = cadenza_binary();
  const std::string model = tiny_model_path();
  const std::string log =
      (std::filesystem::temp_directory_path() /
       ("gateway-test-" + std::to_string(::getpid()) + "-" + name + ".log"))
          .string();
  std::vector<std::string> args = {bin,        "serve",   "-m",           model,
                                   "--host",   "127.0.0.1", "--port",     "0",
                                   "-t",       "1",       "--io-threads", "1",
                                   "--served-model-name", "tiny", "--max-model-len", "1024"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    ADD_FAILURE() << "cannot start " << bin;
    return nullptr;
  }
  auto r = std::unique_ptr<ReplicaProcess>(new ReplicaProcess());
  r->pid_ = pid;
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const std::regex re("listening on http://[0-9.]+:([0-9]+)");
  std::smatch m;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[512];
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (std::regex_search(text, m, re)) {
      r->port_ = static_cast<uint16_t>(std::stoi(m[1]));
      break;
    }
  }
  close(out[0]);
  if (r->port_ == 0) {
    ADD_FAILURE() << "replica " << name << " did not start; see " << log;
    return nullptr;
  }
  // It listens before its warm-up ends; requests before /ready says 200 would get 503.
  while (std::chrono::steady_clock::now() < deadline) {
    if (server::testing::get(r->port_, "/ready").status == 200) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "replica " << name << " never became ready; see " << log;
  return nullptr;
}

void ReplicaProcess::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

ReplicaProcess::~ReplicaProcess() { kill(); }

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
