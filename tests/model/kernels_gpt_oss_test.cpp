// The backend ops that gpt-oss added, against naive formulas (in double) on random data:
// attention with per-head sinks and a sliding window (ragged batch, GQA, every KV type), the
// clamped SwiGLU, per-expert biases, and routing by the raw logits with a softmax over the chosen
// k. They run at the active ISA level (CADENZA_ISA=scalar|avx2|avx512|avx512_vnni picks it).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "attention_reference.h"
#include "backend_test_util.h"
#include "batch_checks.h"
#include "kernels/cpu/cpu_backend.h"

namespace cadenza::kernels {
namespace {

using test::bitwise_equal;

TEST(GptOssKernels, AttentionWithSinksAndWindowMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const AttentionSetup a;
  // Sinks around the scores, one far above them (that head attends almost nowhere).
  std::vector<float> sinks = random_floats(a.n_heads, 34, 1.5f);
  sinks[5] = 12.0f;
  std::unique_ptr<Weight> sink_weight = upload(*backend, DType::F32, sinks, a.n_heads);
  struct Case { bool sinks; int32_t window; };
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    // Windows: not a multiple of the 32-position chunks, a multiple, one position, none.
    for (const Case& c : {Case{true, 0}, Case{false, 45}, Case{true, 45}, Case{true, 32},
                          Case{true, 1}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(type) << " sinks " << c.sinks << " window "
                                        << c.window);
      AttentionParams p{.scale = a.scale, .sinks = c.sinks ? sink_weight.get() : nullptr,
                        .window = c.window};
      EXPECT_LT(max_attention_error(*backend, a, type, p, c.sinks ? &sinks : nullptr), 2e-5);
    }
  }
}

// Sinks of -1e30 add exactly 0 to the denominator and a window longer than every sequence keeps
// every position: both are the default attention, bit for bit.
TEST(GptOssKernels, NeutralSinksAndLongWindowAreTheDefaultBitForBit) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const AttentionSetup a;
  std::unique_ptr<Weight> neutral =
      upload(*backend, DType::F32, std::vector<float>(a.n_heads, -1e30f), a.n_heads);
  for (DType type : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dtype_name(type));
    const std::vector<float> plain = run_attention(*backend, a, type, {.scale = a.scale});
    EXPECT_TRUE(bitwise_equal(plain, run_attention(*backend, a, type,
                                                   {.scale = a.scale, .sinks = neutral.get()})));
    EXPECT_TRUE(bitwise_equal(plain, run_attention(*backend, a, type,
                                                   {.scale = a.scale, .window = 1000})));
  }
}

TEST(GptOssKernels, ClampedSwigluMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const int64_t rows = 5, cols = 70;
  const std::vector<float> gate = random_floats(rows * cols, 35, 6.0f);
  const std::vector<float> up = random_floats(rows * cols, 36, 6.0f);
  HostBuffer gb(*backend, gate), ub(*backend, up), ob(*backend, std::vector<float>(rows * cols));
  const float alpha = 1.702f, limit = 7.0f;
  backend->swiglu_clamped(gb.matrix(rows, cols), ub.matrix(rows, cols), alpha, limit,
                          ob.matrix(rows, cols));
  const std::vector<float> got = ob.floats();
  int clamped = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = std::min<double>(gate[i], limit);
    const double u = std::clamp<double>(up[i], -limit, limit);
    clamped += gate[i] > limit || std::abs(up[i]) > limit;
    const double ref = (u + 1) * g / (1 + std::exp(-alpha * g));
    EXPECT_NEAR(got[i], ref, 1e-5 * std::max(1.0, std::abs(ref))) << i;
  }
  EXPECT_GT(clamped, 10);  // the data reaches the limits
  // In place (out aliases gate): the same values.
  backend->swiglu_clamped(gb.matrix(rows, cols), ub.matrix(rows, cols), alpha, limit,
                          gb.matrix(rows, cols));
  EXPECT_TRUE(bitwise_equal(gb.floats(), got));
}

TEST(GptOssKernels, ExpertBiasAddsTheRowOfEachSlotsExpert) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const int64_t n = 6, k = 3, e = 5, m = 40;
  const std::vector<float> bias = random_floats(e * m, 37);
  const std::vector<float> y = random_floats(n * k * m, 38);
  std::vector<int32_t> ids(n * k);
  for (int64_t i = 0; i < n * k; ++i) ids[i] = static_cast<int32_t>((i * 7) % e);
  ids[4] = -1;  // another rank's expert: the row stays as it is
  for (DType type : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dtype_name(type));
    std::unique_ptr<Weight> b = upload(*backend, type, bias, m, e);
    const std::vector<float> stored = as_stored(type, bias, m);
    HostBuffer yb(*backend, y), ib(*backend, ids);
    backend->add_expert_bias(yb.matrix(n * k, m), *b, ib.index(n, k));
    const std::vector<float> got = yb.floats();
    for (int64_t r = 0; r < n * k; ++r) {
      for (int64_t i = 0; i < m; ++i) {
        const float expected = ids[r] < 0 ? y[r * m + i] : y[r * m + i] + stored[ids[r] * m + i];
        EXPECT_EQ(got[r * m + i], expected) << r << " " << i;
      }
    }
  }
}

// gpt-oss: the top-k of the raw logits (ties: lower id), weights softmax over those k only.
TEST(GptOssKernels, SoftmaxOverTheChosenExpertsMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const int64_t n = 30, e = 16, k = 4;
  std::vector<float> logits = random_floats(n * e, 39, 3.0f);
  logits[3] = logits[9];  // a tie inside the top-k of token 0 or not: the lower id first either way
  RoutingParams p;
  p.gating = ExpertGating::SoftmaxTopK;
  p.normalize_top_k = false;
  HostBuffer lb(*backend, logits), ids_b(*backend, std::vector<int32_t>(n * k)),
      w_b(*backend, std::vector<float>(n * k));
  backend->route_experts(lb.matrix(n, e), p, ids_b.index(n, k), w_b.matrix(n, k));
  const std::vector<int32_t> ids = ids_b.ints();
  const std::vector<float> weights = w_b.floats();
  for (int64_t t = 0; t < n; ++t) {
    std::vector<int32_t> order(e);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
      return logits[t * e + x] > logits[t * e + y];
    });
    double total = 0;
    for (int64_t s = 0; s < k; ++s) total += std::exp(double(logits[t * e + order[s]] - logits[t * e + order[0]]));
    for (int64_t s = 0; s < k; ++s) {
      EXPECT_EQ(ids[t * k + s], order[s]) << "token " << t;
      const double ref = std::exp(double(logits[t * e + order[s]] - logits[t * e + order[0]])) / total;
      EXPECT_NEAR(weights[t * k + s], ref, 1e-6) << "token " << t;
    }
  }
}

}  // namespace
}  // namespace cadenza::kernels
