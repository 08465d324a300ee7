// Whether assert() is compiled in, as the build promises: the sanitizer build (CADENZA_SANITIZE,
// see the top-level CMakeLists.txt) must keep assertions on, so that an assert firing in CI fails
// the suite. CADENZA_EXPECT_ASSERTS is 1 in that build. The test prints what it found, so the CI
// log shows whether assertions ran.
#include <gtest/gtest.h>

#include <cassert>
#include <cstdio>

namespace {

#if defined(NDEBUG)
constexpr bool kAssertsOn = false;
#else
constexpr bool kAssertsOn = true;
#endif

TEST(Build, AssertionsAsConfigured) {
  std::printf("[ asserts  ] assert() is %s in this build\n", kAssertsOn ? "ON" : "OFF (NDEBUG)");
  if (CADENZA_EXPECT_ASSERTS) {
    EXPECT_TRUE(kAssertsOn) << "the sanitizer build must not define NDEBUG";
  }
}

#if !defined(NDEBUG)
// A failing assert really aborts (not compiled to nothing by some other flag).
TEST(BuildDeathTest, FailingAssertAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(assert(1 + 1 == 3 && "assert reached"), "assert reached");
}
#endif

}  // namespace
