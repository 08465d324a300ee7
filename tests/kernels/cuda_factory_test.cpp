// The backend factory and --device parsing (kernels/backend_factory.h). Runs in every build, with
// or without CUDA, with or without a GPU: asking for CUDA where it cannot work must be a clear
// error, never a crash.
#include <gtest/gtest.h>

#include "kernels/backend_factory.h"
#ifdef CADENZA_TEST_HAS_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace cadenza::kernels {
namespace {

TEST(DeviceParse, AcceptsCpuCudaAndOrdinals) {
  Result<DeviceChoice> cpu = parse_device("cpu");
  ASSERT_TRUE(cpu) << cpu.error();
  EXPECT_EQ(cpu->kind, DeviceChoice::Kind::Cpu);
  EXPECT_EQ(cpu->to_string(), "cpu");

  Result<DeviceChoice> cuda = parse_device("cuda");
  ASSERT_TRUE(cuda) << cuda.error();
  EXPECT_EQ(cuda->kind, DeviceChoice::Kind::Cuda);
  EXPECT_EQ(cuda->index, 0);
  EXPECT_EQ(cuda->to_string(), "cuda:0");

  Result<DeviceChoice> three = parse_device("cuda:3");
  ASSERT_TRUE(three) << three.error();
  EXPECT_EQ(three->kind, DeviceChoice::Kind::Cuda);
  EXPECT_EQ(three->index, 3);
}

TEST(DeviceParse, RejectsMalformedValuesWithTheirText) {
  for (const char* bad : {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "cuda:99999",
                          "cuda:0:1", " cpu", "cpu "}) {
    SCOPED_TRACE(bad);
    Result<DeviceChoice> r = parse_device(bad);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find(std::string("'") + bad + "'"), std::string::npos) << r.error();
  }
}

TEST(BackendFactory, CpuAlwaysWorks) {
  Result<std::unique_ptr<Backend>> b = create_backend("cpu", {.n_threads = 1});
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ((*b)->name(), "cpu");
}

TEST(BackendFactory, BadDeviceIsAnError) {
  Result<std::unique_ptr<Backend>> b = create_backend("tpu");
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().find("unknown device 'tpu'"), std::string::npos) << b.error();
}

// Without CUDA in the build: a clear error. With CUDA but no device: "no CUDA device". With a
// device: a working backend, and an ordinal past the last device is an error naming the count.
TEST(BackendFactory, CudaIsAClearErrorWhereItCannotWork) {
  Result<std::unique_ptr<Backend>> b = create_backend("cuda");
  if (!cuda_built()) {
    ASSERT_FALSE(b);
    EXPECT_NE(b.error().find("this build has no CUDA support"), std::string::npos) << b.error();
    return;
  }
#ifdef CADENZA_TEST_HAS_CUDA
  const int count = cuda_device_count();
  std::cout << "[cuda] built with CUDA; " << count << " device(s) visible\n";
  if (count == 0) {
    ASSERT_FALSE(b);
    EXPECT_NE(b.error().find("no CUDA device"), std::string::npos) << b.error();
    return;
  }
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ((*b)->name(), "cuda");
  ASSERT_NE(cuda_device_info(**b), nullptr);
  EXPECT_GT(cuda_device_info(**b)->total_bytes, 0u);
  Result<std::unique_ptr<Backend>> past = create_backend("cuda:" + std::to_string(count));
  ASSERT_FALSE(past);
  EXPECT_NE(past.error().find("does not exist"), std::string::npos) << past.error();
#else
  FAIL() << "cuda_built() but the test was compiled without CADENZA_TEST_HAS_CUDA";
#endif
}

}  // namespace
}  // namespace cadenza::kernels
