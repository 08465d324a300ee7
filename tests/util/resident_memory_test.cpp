// resident_bytes_of (mincore) on an anonymous mapping: nothing resident before the pages are
// touched, exactly the touched pages after; available and resident memory are positive on Linux.
#include "util/resident_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace cadenza {
namespace {

TEST(ResidentMemory, CountsTheTouchedPagesOfAMapping) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t size = 64 * page;
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto* bytes = static_cast<unsigned char*>(map);
  EXPECT_EQ(resident_bytes_of(bytes, size), 0u);
  for (size_t p = 0; p < 64; p += 4) bytes[p * page + 7] = 1;  // 16 pages
  EXPECT_EQ(resident_bytes_of(bytes, size), 16 * page);
  // A range that starts and ends inside pages counts the pages it touches.
  EXPECT_EQ(resident_bytes_of(bytes + 3, page), page);
  EXPECT_EQ(resident_bytes_of(nullptr, 10), 0u);
  ::munmap(map, size);
  EXPECT_GT(available_memory_bytes(), 0u);
  EXPECT_GT(current_resident_bytes(), 0u);
  EXPECT_GE(peak_resident_bytes(), current_resident_bytes());
}

}  // namespace
}  // namespace cadenza
