// Running the built `cadenza` binary (CADENZA_BIN) from a test: its exit status, stdout and stderr
// apart (so a test can check that stdout carries only the command's output), temporary folders
// come from tests/temp_dir.h.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "temp_dir.h"

namespace cadenza::test {

inline std::string read_text_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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
  TempDir dir("cadenza-cli-run");
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
