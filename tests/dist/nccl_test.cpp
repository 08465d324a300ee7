// NCCL between GPU ranks (src/dist/nccl_group.h), under mpirun -np 2 (tests/dist/CMakeLists.txt).
// Skips, visibly, without NCCL in the build or without a CUDA device for every rank; CI has
// neither GPU nor device, so there these tests report the skip.
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dist/mpi_communicator.h"
#include "dist/nccl_group.h"
#include "kernels/backend_factory.h"
#include "model/model.h"
#include "model/synthetic_model.h"

namespace cadenza {
namespace {

dist::Communicator* g_world = nullptr;

#define CADENZA_REQUIRE_GPU_PER_RANK()                                                          \
  do {                                                                                          \
    if (!dist::nccl_built()) GTEST_SKIP() << "SKIPPED: no CUDA device: this build has no NCCL"; \
    if (kernels::cuda_devices() < 1)                                                            \
      GTEST_SKIP() << "SKIPPED: no CUDA device on this machine";                               \
  } while (0)

TEST(Nccl, AllGatherOfDeviceBuffers) {
  CADENZA_REQUIRE_GPU_PER_RANK();
  const int rank = g_world->rank(), size = g_world->size();
  const int device = rank % kernels::cuda_devices();
  auto backend = kernels::create_backend("cuda:" + std::to_string(device));
  ASSERT_TRUE(backend) << backend.error();
  auto group = dist::NcclGroup::create(*g_world, device);
  ASSERT_TRUE(group) << group.error();
  const size_t n = 1000;
  auto send = (*backend)->allocate(n * sizeof(float));
  auto recv = (*backend)->allocate(n * sizeof(float) * static_cast<size_t>(size));
  ASSERT_TRUE(send && recv);
  std::vector<float> mine(n);
  for (size_t i = 0; i < n; ++i) mine[i] = static_cast<float>(rank * 10000 + static_cast<int>(i));
  (*backend)->write(**send, 0, mine.data(), n * sizeof(float));
  (*backend)->synchronize();
  ASSERT_TRUE((*group)->all_gather((*send)->data(), n * sizeof(float), (*recv)->data()));
  std::vector<float> all(n * static_cast<size_t>(size));
  (*backend)->read(**recv, 0, all.data(), all.size() * sizeof(float));
  for (int r = 0; r < size; ++r) {
    for (size_t i = 0; i < n; i += 97) {
      EXPECT_EQ(all[static_cast<size_t>(r) * n + i], static_cast<float>(r * 10000 + static_cast<int>(i)));
    }
  }
}

TEST(Nccl, SplitModelOnGpusMatchesOneGpu) {
  CADENZA_REQUIRE_GPU_PER_RANK();
  const int rank = g_world->rank(), size = g_world->size();
  const int device = rank % kernels::cuda_devices();
  if (kernels::cuda_devices() < size) {
    GTEST_SKIP() << "SKIPPED: no CUDA device for every rank (" << kernels::cuda_devices()
                 << " devices, " << size << " ranks): the split would stage through MPI";
  }
  auto backend = kernels::create_backend("cuda:" + std::to_string(device));
  ASSERT_TRUE(backend) << backend.error();
  test::SyntheticSpec spec;
  spec.embd = 128;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.ff = 256;
  auto bytes = std::make_shared<std::vector<uint8_t>>(test::synthetic_bytes(spec));
  auto parsed = gguf::GgufFile::parse(*bytes, "nccl-model");
  ASSERT_TRUE(parsed);
  std::shared_ptr<gguf::GgufFile> file(parsed->release(), [bytes](gguf::GgufFile* f) { delete f; });
  auto split = model::Model::load(file, **backend,
                                  {.world = g_world, .parallel = {.tensor = size, .pipeline = 1}});
  ASSERT_TRUE(split) << split.error();
  ASSERT_TRUE((*split)->distributed()->uses_nccl());
  if (rank != 0) {
    EXPECT_TRUE((*split)->serve_worker());
    return;
  }
  auto whole = model::Model::load(file, **backend);
  ASSERT_TRUE(whole);
  const int64_t V = (*whole)->config().n_vocab;
  const std::vector<int32_t> tokens = {1, 5, 9, 13, 2, 7}, pos = {0, 1, 2, 3, 4, 5},
                             seq(6, 0), rows = {2, 5};
  const std::vector<int32_t> table = {0, 1};
  std::vector<std::span<const int32_t>> tables = {table};
  auto kv = (*split)->create_kv_cache({.num_blocks = 4, .block_size = 4});
  auto ref = (*whole)->create_kv_cache({.num_blocks = 4, .block_size = 4});
  ASSERT_TRUE(kv && ref);
  std::vector<float> got(2 * static_cast<size_t>(V)), want(got.size());
  ASSERT_TRUE((*split)->forward({tokens, pos, seq, tables, rows}, **kv, got));
  ASSERT_TRUE((*whole)->forward({tokens, pos, seq, tables, rows}, **ref, want));
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double{got[i]} - want[i]));
  EXPECT_LE(worst, 1e-3);
}

}  // namespace
}  // namespace cadenza

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!cadenza::dist::MpiRuntime::launched()) {
    std::fprintf(stderr, "test_dist_nccl runs under mpirun (tests/dist/CMakeLists.txt)\n");
    return 2;
  }
  if (auto st = cadenza::dist::MpiRuntime::init(&argc, &argv); !st) return 2;
  auto world = cadenza::dist::MpiRuntime::world();
  if (!world) return 2;
  (*world)->set_timeout(60);
  cadenza::g_world = world->get();
  if ((*world)->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  // Every test skipped (no NCCL, no GPU): exit 77, which ctest reports as a skip with the
  // "SKIPPED: ..." reason above, instead of a pass.
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (rc == 0 && unit.test_to_run_count() > 0 && unit.skipped_test_count() == unit.test_to_run_count()) {
    rc = 77;
  }
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  world->reset();
  return worst;
}
