// Locating ../shared, the test data beside the checkout (see the project README).
// Tests that need it call CADENZA_REQUIRE_SHARED() which skips with a visible message when absent.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace cadenza::test {

// $CADENZA_SHARED_DIR if set, else <source dir>/../shared. Empty when neither exists.
inline std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("CADENZA_SHARED_DIR"); env && *env) {
    if (std::filesystem::is_directory(env)) return env;
    return {};
  }
  std::filesystem::path p = std::filesystem::path(CADENZA_SOURCE_DIR).parent_path() / "shared";
  if (std::filesystem::is_directory(p)) return p;
  return {};
}

// The stems of ../shared/models/*.gguf, sorted; {"none"} when there are none, so that a
// parameterized suite still has one test, which then reports the skip (CADENZA_REQUIRE_SHARED).
inline std::vector<std::string> shared_model_names() {
  std::vector<std::string> names;
  const std::filesystem::path dir = shared_dir();
  if (!dir.empty() && std::filesystem::is_directory(dir / "models")) {
    for (const auto& entry : std::filesystem::directory_iterator(dir / "models")) {
      if (entry.path().extension() == ".gguf") names.push_back(entry.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) names.push_back("none");
  return names;
}

}  // namespace cadenza::test

#define CADENZA_REQUIRE_SHARED()                                                              \
  do {                                                                                        \
    if (::cadenza::test::shared_dir().empty())                                                \
      GTEST_SKIP() << "SKIPPED: ../shared test data not found beside the checkout (set "      \
                      "CADENZA_SHARED_DIR to point at it)";                                  \
  } while (0)
