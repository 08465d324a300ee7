// The backend factory and --device parsing (kernels/backend_factory.h). Runs in every build, with
// or without CUDA, with or without a GPU: asking for CUDA where it cannot work must be a clear
// error, never a crash.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "kernels/backend_factory.h"
#ifdef CADENZA_TEST_HAS_CUDA
#include "kernels/cuda/cublas_api.h"
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

// The libraries this process has mapped (/proc/self/maps), one path a line.
std::string mapped_files() {
  std::ifstream in("/proc/self/maps");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// cuBLAS and NCCL are opened when a CUDA backend or an NCCL group is made, not linked: a process
// that runs on the CPU never maps them (a linked cuBLAS costs ~144 MiB resident). ctest runs each
// test in a process of its own, so no earlier CUDA test can have opened them here.
TEST(BackendFactory, CpuRunsMapNoGpuLibraries) {
  const std::string before = mapped_files();
  ASSERT_NE(before.find("libc.so.6"), std::string::npos) << "unreadable /proc/self/maps:\n" << before;
  Result<std::unique_ptr<Backend>> b = create_backend("cpu", {.n_threads = 1});
  ASSERT_TRUE(b) << b.error();
  (void)cuda_devices();  // the CUDA runtime's device query needs the driver only
  const std::string after = mapped_files();
  for (const char* lib : {"libcublas", "libcublasLt", "libnccl"}) {
    EXPECT_EQ(after.find(lib), std::string::npos) << lib << " is mapped:\n" << after;
  }
}

#ifdef CADENZA_TEST_HAS_CUDA
// The loader itself, without a device: the toolkit's libcublas opens and every function binds.
TEST(CublasApi, OpensTheToolkitsLibraryWithoutADevice) {
  Result<const cuda::CublasApi*> api = cuda::cublas_api();
  ASSERT_TRUE(api) << api.error();
  const cuda::CublasApi& a = **api;
  EXPECT_NE(a.create, nullptr);
  EXPECT_NE(a.destroy, nullptr);
  EXPECT_NE(a.set_stream, nullptr);
  EXPECT_NE(a.sgemm, nullptr);
  EXPECT_NE(a.gemm_ex, nullptr);
  ASSERT_NE(a.status_string, nullptr);
  // Called through the pointer: texts that differ by status (their wording is the library's).
  ASSERT_NE(a.status_string(CUBLAS_STATUS_SUCCESS), nullptr);
  EXPECT_STRNE(a.status_string(CUBLAS_STATUS_SUCCESS),
               a.status_string(CUBLAS_STATUS_NOT_INITIALIZED));
  EXPECT_NE(mapped_files().find("libcublas"), std::string::npos);
  // A second call returns the same table.
  Result<const cuda::CublasApi*> again = cuda::cublas_api();
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *api);
}
#endif

}  // namespace
}  // namespace cadenza::kernels
