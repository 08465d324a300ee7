#include "util/result.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <vector>

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

// Released pages read back the same bytes (through the mapping and with read_at), and source_of
// finds the file offset of a mapped byte and nothing for other memory.
TEST(MappedFile, ReleasedPagesKeepTheirBytes) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("cadenza-mapped-" + std::to_string(::getpid())))
          .string();
  std::vector<uint8_t> bytes(5 * 4096 + 123);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error();
  const std::span<const uint8_t> mapped = (*f)->bytes();
  ASSERT_EQ(mapped.size(), bytes.size());
  EXPECT_EQ(0, std::memcmp(mapped.data(), bytes.data(), bytes.size()));  // all pages resident
  // Whole pages inside [100, 100 + 3 * 4096 + 50): pages 1..3 (4 KiB pages).
  const size_t released = MappedFile::release_pages(mapped.data() + 100, 3 * 4096 + 50);
  EXPECT_EQ(released % 4096, 0u);
  EXPECT_GE(released, 4096u);
  EXPECT_EQ(0, std::memcmp(mapped.data(), bytes.data(), bytes.size()));

  const std::optional<MappedFile::Source> source = MappedFile::source_of(mapped.data() + 5000);
  ASSERT_TRUE(source.has_value());
  EXPECT_EQ(source->offset, 5000u);
  std::vector<uint8_t> read(300);
  ASSERT_TRUE(MappedFile::read_at(*source, source->offset, read.data(), read.size()));
  EXPECT_EQ(0, std::memcmp(read.data(), bytes.data() + 5000, read.size()));
  EXPECT_FALSE(MappedFile::source_of(bytes.data()).has_value());
  (*f).reset();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace cadenza
