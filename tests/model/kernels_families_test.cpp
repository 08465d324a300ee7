// The backend ops that the dense families gemma3, phi3, mistral3 and granite added, against
// naive formulas (in double) on random data: scale, GeGLU (tanh GELU), soft-capping and the
// position-dependent scaling of Ministral 3's attention temperature; in place too.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "backend_test_util.h"
#include "kernels/cpu/cpu_backend.h"

namespace cadenza::kernels {
namespace {

constexpr int64_t kRows = 5, kCols = 70;

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

TEST(FamilyKernels, ScaleMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const std::vector<float> x = random_floats(kRows * kCols, 41, 3.0f);
  HostBuffer xb(*backend, x), ob(*backend, std::vector<float>(kRows * kCols));
  backend->scale(xb.matrix(kRows, kCols), 0.22f, ob.matrix(kRows, kCols));
  const std::vector<float> got = ob.floats();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], x[i] * 0.22f) << i;
  backend->scale(xb.matrix(kRows, kCols), 0.22f, xb.matrix(kRows, kCols));
  EXPECT_TRUE(bitwise_equal(xb.floats(), got));
}

TEST(FamilyKernels, GegluMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const std::vector<float> gate = random_floats(kRows * kCols, 42, 3.0f);
  const std::vector<float> up = random_floats(kRows * kCols, 43, 2.0f);
  HostBuffer gb(*backend, gate), ub(*backend, up), ob(*backend, std::vector<float>(kRows * kCols));
  backend->geglu(gb.matrix(kRows, kCols), ub.matrix(kRows, kCols), ob.matrix(kRows, kCols));
  const std::vector<float> got = ob.floats();
  for (size_t i = 0; i < got.size(); ++i) {
    const double ref = gelu_tanh(gate[i]) * up[i];
    EXPECT_NEAR(got[i], ref, 1e-5 * std::max(1.0, std::abs(ref))) << i;
  }
  // GELU's shape: ~x for large x, ~0 for very negative x.
  EXPECT_NEAR(gelu_tanh(6.0), 6.0, 1e-6);
  backend->geglu(gb.matrix(kRows, kCols), ub.matrix(kRows, kCols), gb.matrix(kRows, kCols));
  EXPECT_TRUE(bitwise_equal(gb.floats(), got));
}

TEST(FamilyKernels, SoftcapMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const std::vector<float> x = random_floats(kRows * kCols, 44, 40.0f);
  HostBuffer xb(*backend, x), ob(*backend, std::vector<float>(kRows * kCols));
  const float cap = 30.0f;
  backend->softcap(xb.matrix(kRows, kCols), cap, ob.matrix(kRows, kCols));
  const std::vector<float> got = ob.floats();
  for (size_t i = 0; i < got.size(); ++i) {
    const double ref = cap * std::tanh(static_cast<double>(x[i]) / cap);
    EXPECT_NEAR(got[i], ref, 1e-5 * std::max(1.0, std::abs(ref))) << i;
    EXPECT_LT(std::abs(got[i]), cap + 1e-4) << i;
  }
  backend->softcap(xb.matrix(kRows, kCols), cap, xb.matrix(kRows, kCols));
  EXPECT_TRUE(bitwise_equal(xb.floats(), got));
}

TEST(FamilyKernels, ScaleByPositionMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const std::vector<float> x = random_floats(kRows * kCols, 45);
  const std::vector<int32_t> positions = {0, 63, 64, 200, 100000};
  HostBuffer xb(*backend, x), pb(*backend, positions),
      ob(*backend, std::vector<float>(kRows * kCols));
  const float beta = 0.1f;
  const int32_t length = 64;
  backend->scale_by_position(xb.matrix(kRows, kCols), pb.index(kRows, 1), beta, length, 0,
                             ob.matrix(kRows, kCols));
  const std::vector<float> got = ob.floats();
  for (int64_t r = 0; r < kRows; ++r) {
    const double s = 1.0 + beta * std::log(1.0 + std::floor(positions[r] / double{length}));
    for (int64_t c = 0; c < kCols; ++c) {
      const size_t i = static_cast<size_t>(r * kCols + c);
      EXPECT_NEAR(got[i], x[i] * s, 1e-6 * std::max(1.0, std::abs(x[i] * s))) << r << " " << c;
    }
  }
  // Positions below the length are not scaled at all.
  for (int64_t c = 0; c < 2 * kCols; ++c) EXPECT_EQ(got[c], x[c]);
  // Llama 4's offset of one: floor((p + 1) / length), so position 63 is scaled, 0 is not.
  backend->scale_by_position(xb.matrix(kRows, kCols), pb.index(kRows, 1), beta, length, 1,
                             ob.matrix(kRows, kCols));
  const std::vector<float> shifted = ob.floats();
  for (int64_t r = 0; r < kRows; ++r) {
    const double s = 1.0 + beta * std::log(1.0 + std::floor((positions[r] + 1) / double{length}));
    for (int64_t c = 0; c < kCols; ++c) {
      const size_t i = static_cast<size_t>(r * kCols + c);
      EXPECT_NEAR(shifted[i], x[i] * s, 1e-6 * std::max(1.0, std::abs(x[i] * s))) << r << " " << c;
    }
  }
  EXPECT_NE(shifted[kCols], x[kCols]);  // position 63
  backend->scale_by_position(xb.matrix(kRows, kCols), pb.index(kRows, 1), beta, length, 0,
                             xb.matrix(kRows, kCols));
  EXPECT_TRUE(bitwise_equal(xb.floats(), got));
}

}  // namespace
}  // namespace cadenza::kernels
