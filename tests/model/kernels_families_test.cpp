// The backend ops that the dense families gemma3, phi3, mistral3 and granite added, against
// naive formulas (in double) on random data: scale, GeGLU (tanh GELU), soft-capping and the
// position-dependent scaling of Ministral 3's attention temperature; in place too. And
// granitehybrid's Mamba-2 ops: ssm_scan (two sequences interleaved in one batch, one starting at
// position 0, one continuing a state; x, B and C column views of one matrix) and short_conv's
// bias.
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

TEST(FamilyKernels, SsmScanMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const int64_t H = 4, G = 2, P = 6, N = 5, T = 6, X = H * P + 2 * G * N;
  const int64_t state_cols = H * N * P;
  // Tokens in batch order: sequence A (slot 1) at positions 0..2, sequence B (slot 0) at 3..5
  // continuing the state already in its slot, interleaved.
  const std::vector<int32_t> positions = {0, 3, 1, 4, 2, 5}, slots = {1, 0, 1, 0, 1, 0};
  const std::vector<float> xbc = random_floats(T * X, 51), dt = random_floats(T * H, 52);
  std::vector<float> a = random_floats(H, 53), d = random_floats(H, 54);
  const std::vector<float> dt_bias = random_floats(H, 55, 0.5f);
  for (float& v : a) v = -std::abs(v) - 0.1f;
  std::vector<float> state = random_floats(2 * state_cols, 56, 0.3f);
  const std::vector<float> initial = state;
  std::unique_ptr<Weight> wa = upload(*backend, DType::F32, a, H);
  std::unique_ptr<Weight> wd = upload(*backend, DType::F32, d, H);
  std::unique_ptr<Weight> wb = upload(*backend, DType::F32, dt_bias, H);
  HostBuffer xb(*backend, xbc), dtb(*backend, dt), sb(*backend, state);
  HostBuffer pb(*backend, positions), slb(*backend, slots);
  HostBuffer ob(*backend, std::vector<float>(T * H * P));
  const Matrix all = xb.matrix(T, X);
  SsmScanParams params{.n_heads = H, .n_groups = G, .head_dim = P, .state_size = N,
                       .a = wa.get(), .d = wd.get(), .dt_bias = wb.get()};
  backend->ssm_scan({all.data, T, H * P, X}, {all.data + H * P, T, G * N, X},
                    {all.data + H * P + G * N, T, G * N, X}, dtb.matrix(T, H),
                    sb.matrix(2, state_cols), {pb.index(T, 1), slb.index(T, 1)}, params,
                    ob.matrix(T, H * P));
  const std::vector<float> out = ob.floats(), final_state = sb.floats();

  // Naive: per slot a double state [H][N][P], head h reading group h / (H / G).
  std::vector<double> S(initial.begin(), initial.end());
  for (int64_t t = 0; t < T; ++t) {
    double* row = S.data() + slots[t] * state_cols;
    if (positions[t] == 0) std::fill(row, row + state_cols, 0.0);
    const float* x = xbc.data() + t * X;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      const float* B = x + H * P + g * N;
      const float* C = x + H * P + G * N + g * N;
      const double step = std::log1p(std::exp(double{dt[t * H + h]} + dt_bias[h]));
      const double decay = std::exp(step * a[h]);
      for (int64_t p = 0; p < P; ++p) {
        double y = 0;
        for (int64_t n = 0; n < N; ++n) {
          double& s = row[h * N * P + n * P + p];
          s = s * decay + B[n] * step * x[h * P + p];
          y += s * C[n];
        }
        y += d[h] * x[h * P + p];
        EXPECT_NEAR(out[t * H * P + h * P + p], y, 1e-5 * (1 + std::abs(y))) << t << " " << h;
      }
    }
  }
  for (size_t i = 0; i < S.size(); ++i) EXPECT_NEAR(final_state[i], S[i], 1e-5) << i;
}

TEST(FamilyKernels, ShortConvAddsTheBiasBeforeTheSilu) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const int64_t C = 12, K = 3, T = 4;
  const std::vector<float> x = random_floats(T * C, 61), w = random_floats(C * K, 62);
  const std::vector<float> bias = random_floats(C, 63);
  const std::vector<int32_t> positions = {0, 1, 2, 3}, slots = {0, 0, 0, 0};
  std::unique_ptr<Weight> ww = upload(*backend, DType::F32, w, K, C);
  std::unique_ptr<Weight> wb = upload(*backend, DType::F32, bias, C);
  HostBuffer xb(*backend, x), sb(*backend, std::vector<float>((K - 1) * C));
  HostBuffer pb(*backend, positions), slb(*backend, slots);
  HostBuffer ob(*backend, std::vector<float>(T * C));
  backend->short_conv(xb.matrix(T, C), *ww, wb.get(), sb.matrix(1, (K - 1) * C),
                      {pb.index(T, 1), slb.index(T, 1)}, ob.matrix(T, C));
  const std::vector<float> out = ob.floats();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      double s = bias[c];
      for (int64_t k = 0; k < K; ++k) {
        const int64_t src = t - (K - 1) + k;  // oldest tap first; before the start: zeros
        if (src >= 0) s += double{w[c * K + k]} * x[src * C + c];
      }
      EXPECT_NEAR(out[t * C + c], s / (1 + std::exp(-s)), 1e-5) << t << " " << c;
    }
  }
}

}  // namespace
}  // namespace cadenza::kernels
