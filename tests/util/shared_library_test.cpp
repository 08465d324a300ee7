// SharedLibrary (util/shared_library.h): the first candidate that loads is opened, symbols bind to
// typed pointers that work, and every failure is an error naming what was tried.
#include <gtest/gtest.h>

#include "util/shared_library.h"

namespace cadenza {
namespace {

TEST(SharedLibrary, OpensTheFirstCandidateThatLoadsAndCallsThroughABoundPointer) {
  Result<SharedLibrary> lib =
      SharedLibrary::open({"libcadenza-no-such-library.so.1", "libm.so.6"});
  ASSERT_TRUE(lib) << lib.error();
  EXPECT_EQ(lib->name(), "libm.so.6");
  double (*cosine)(double) = nullptr;
  ASSERT_TRUE(lib->bind(cosine, "cos"));
  ASSERT_NE(cosine, nullptr);
  EXPECT_DOUBLE_EQ(cosine(0.0), 1.0);
  EXPECT_DOUBLE_EQ(cosine(3.141592653589793), -1.0);
}

TEST(SharedLibrary, AMissingLibraryNamesEveryCandidate) {
  Result<SharedLibrary> lib =
      SharedLibrary::open({"libcadenza-missing-a.so", "/nonexistent/libcadenza-missing-b.so"});
  ASSERT_FALSE(lib);
  EXPECT_NE(lib.error().find("libcadenza-missing-a.so"), std::string::npos) << lib.error();
  EXPECT_NE(lib.error().find("/nonexistent/libcadenza-missing-b.so"), std::string::npos)
      << lib.error();
  EXPECT_FALSE(SharedLibrary::open({}));
}

TEST(SharedLibrary, AMissingSymbolIsAnErrorAndLeavesThePointerAlone) {
  Result<SharedLibrary> lib = SharedLibrary::open({"libm.so.6"});
  ASSERT_TRUE(lib) << lib.error();
  void (*f)() = nullptr;
  Status st = lib->bind(f, "cadenza_no_such_symbol");
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("libm.so.6"), std::string::npos) << st.error();
  EXPECT_NE(st.error().find("cadenza_no_such_symbol"), std::string::npos) << st.error();
  EXPECT_EQ(f, nullptr);
}

}  // namespace
}  // namespace cadenza
