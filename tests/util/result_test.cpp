#include "util/result.h"

#include <gtest/gtest.h>

#include "util/mapped_file.h"

namespace cadenza {
namespace {

Result<int> half(int x) {
  if (x % 2 != 0) return make_error("{} is odd", x);
  return x / 2;
}

TEST(Result, CarriesValueOrError) {
  auto a = half(8);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 4);
  auto b = half(7);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error(), "7 is odd");
}

TEST(MappedFile, MissingFileIsAnErrorNamingThePath) {
  auto f = MappedFile::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().find("/nonexistent/dir/model.gguf"), std::string::npos);
}

TEST(MappedFile, DirectoryIsRejected) {
  auto f = MappedFile::open("/tmp");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace cadenza
