// NCCL's loader (dist/nccl_api.h), in builds with nccl.h: libnccl is opened on demand, without a
// GPU, and every function NcclGroup calls binds. (NcclGroup itself: nccl_test.cpp, under mpirun,
// with two GPUs.)
#include <gtest/gtest.h>

#ifdef CADENZA_HAS_NCCL
#include <fstream>
#include <sstream>

#include "dist/nccl_api.h"

namespace cadenza::dist {
namespace {

TEST(NcclApi, OpensTheToolkitsLibraryWithoutADevice) {
  Result<const NcclApi*> api = nccl_api();
  ASSERT_TRUE(api) << api.error();
  const NcclApi& a = **api;
  EXPECT_NE(a.get_unique_id, nullptr);
  EXPECT_NE(a.comm_init_rank, nullptr);
  EXPECT_NE(a.comm_destroy, nullptr);
  EXPECT_NE(a.all_gather, nullptr);
  ASSERT_NE(a.error_string, nullptr);
  // Called through the pointer: texts that differ by result (their wording is the library's).
  ASSERT_NE(a.error_string(ncclSuccess), nullptr);
  EXPECT_STRNE(a.error_string(ncclSuccess), a.error_string(ncclInvalidArgument));
  std::ifstream in("/proc/self/maps");
  std::ostringstream maps;
  maps << in.rdbuf();
  EXPECT_NE(maps.str().find("libnccl"), std::string::npos);
}

}  // namespace
}  // namespace cadenza::dist
#endif
