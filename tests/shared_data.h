// Locating ../shared, the test data beside the checkout (see the project README).
// Tests that need it call CADENZA_REQUIRE_SHARED() which skips with a visible message when absent.
#pragma once

#include <filesystem>
#include <string>

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

}  // namespace cadenza::test

#define CADENZA_REQUIRE_SHARED()                                                              \
  do {                                                                                        \
    if (::cadenza::test::shared_dir().empty())                                                \
      GTEST_SKIP() << "SKIPPED: ../shared test data not found beside the checkout (set "      \
                      "CADENZA_SHARED_DIR to point at it)";                                  \
  } while (0)
