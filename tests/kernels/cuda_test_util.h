// Helpers of the CUDA backend tests: skip without a device, move host data in and out of any
// backend, random data.
#pragma once

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"

// Skips (visibly) when no CUDA device is visible: CI has the toolkit but no GPU.
#define CADENZA_REQUIRE_CUDA()                                                                   \
  do {                                                                                           \
    if (::cadenza::kernels::cuda_device_count() == 0)                                            \
      GTEST_SKIP() << "SKIPPED: no CUDA device visible (these tests run on a GPU machine: "      \
                      "scripts/gpu_check.sh)";                                                   \
  } while (0)

namespace cadenza::test {

// A matrix in a backend's memory.
struct DevMatrix {
  std::unique_ptr<kernels::Buffer> buffer;
  kernels::Matrix m;
};
struct DevIndex {
  std::unique_ptr<kernels::Buffer> buffer;
  kernels::IndexMatrix m;
};

inline DevMatrix put(kernels::Backend& b, const std::vector<float>& v, int64_t rows, int64_t cols) {
  EXPECT_EQ(static_cast<int64_t>(v.size()), rows * cols);
  auto buf = b.allocate(v.size() * sizeof(float) + 4);
  EXPECT_TRUE(buf) << buf.error();
  b.write(**buf, 0, v.data(), v.size() * sizeof(float));
  DevMatrix d;
  d.m = kernels::Matrix::of((*buf)->data(), rows, cols);
  d.buffer = std::move(*buf);
  return d;
}
inline DevMatrix zeros(kernels::Backend& b, int64_t rows, int64_t cols) {
  return put(b, std::vector<float>(static_cast<size_t>(rows * cols), 0.0f), rows, cols);
}
inline DevIndex put_idx(kernels::Backend& b, const std::vector<int32_t>& v, int64_t rows, int64_t cols) {
  EXPECT_EQ(static_cast<int64_t>(v.size()), rows * cols);
  auto buf = b.allocate(v.size() * sizeof(int32_t) + 4);
  EXPECT_TRUE(buf) << buf.error();
  b.write(**buf, 0, v.data(), v.size() * sizeof(int32_t));
  DevIndex d;
  d.m = kernels::IndexMatrix::of((*buf)->data(), rows, cols);
  d.buffer = std::move(*buf);
  return d;
}
inline std::vector<float> get(kernels::Backend& b, const DevMatrix& d) {
  std::vector<float> v(static_cast<size_t>(d.m.rows * d.m.cols));
  b.read(*d.buffer, 0, v.data(), v.size() * sizeof(float));
  return v;
}
inline std::vector<int32_t> get_idx(kernels::Backend& b, const DevIndex& d) {
  std::vector<int32_t> v(static_cast<size_t>(d.m.rows * d.m.cols));
  b.read(*d.buffer, 0, v.data(), v.size() * sizeof(int32_t));
  return v;
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// max |a - b| / (|b| + floor): relative error with an absolute floor for values near zero.
inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b, double floor = 1.0) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])) /
                     (std::abs(static_cast<double>(b[i])) + floor);
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
  }
  return worst;
}

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace cadenza::test
