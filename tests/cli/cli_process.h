// Running the built `cadenza` binary (CADENZA_BIN) from a test: its exit status, stdout and stderr
// apart (so a test can check that stdout carries only the command's output), and a temporary
// folder with a unique name per test binary and instance.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

namespace cadenza::test {

inline std::string read_text_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh folder under the system temp folder, removed with the object.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    static int counter = 0;
    const auto salt = std::random_device{}();
    path_ = std::filesystem::temp_directory_path() /
            ("cadenza-" + tag + "-" + std::to_string(::getpid()) + "-" +
             std::to_string(counter++) + "-" + std::to_string(salt));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// `s` as one single-quoted shell word.
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

struct CliRun {
  int status = -1;  // the exit code; -1 when the process did not exit normally
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `cadenza <args>` through the shell (`args` is shell text: quote words with shell_quote),
// stdin from /dev/null.
inline CliRun run_cadenza(const std::string& args) {
  ScratchDir dir("cli-run");
  const auto out = dir.path() / "stdout";
  const auto err = dir.path() / "stderr";
  const std::string cmd = shell_quote(CADENZA_BIN) + " " + args + " < /dev/null > " +
                          shell_quote(out.string()) + " 2> " + shell_quote(err.string());
  CliRun r;
  const int status = std::system(cmd.c_str());
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text_file(out);
  r.err = read_text_file(err);
  return r;
}

}  // namespace cadenza::test
