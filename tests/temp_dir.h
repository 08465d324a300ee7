// A fresh, uniquely named folder under the temp directory for one test's files (mkdtemp), removed
// with everything in it when the TempDir goes away. Tests run in parallel (ctest -j, one process
// per test): fixed names under /tmp would let two of them overwrite each other's files.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace cadenza::test {

class TempDir {
 public:
  explicit TempDir(const std::string& stem = "cadenza-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (stem + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The path of `name` inside the folder (the file is not created).
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace cadenza::test
