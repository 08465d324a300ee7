// The CUDA backend's row ops, matmuls and MoE helpers against the CPU backend (or, for matmuls, a
// double-precision reference from the dequantized weights) on random non-zero data. Skips visibly
// without a CUDA device.
//
// Tolerances:
//  - get_rows / gather_rows / weighted_sum_slots / route_experts ids: exact (same formulas, no
//    fused multiply-adds on either side).
//  - matmul (invariant kernels): |gpu - ref| <= k * 2^-23 * sum_i |w_i x_i| + 1e-30, the classic
//    bound of an f32 dot product of length k (the kernels sum chunks of 64 with fma chains).
//    The CPU backend is not the reference for quantized types because its SIMD kernels round the
//    activations to 8 bits (Q8_0/Q8_K) first, as the reference implementation does.
//  - matmul (cuBLAS path, CADENZA_CUDA_GEMM=cublas): activations (and quantized weights) rounded
//    to bf16/f16 first: 1e-2 * sum_i |w_i x_i|.
//  - elementwise ops, RMS norm, RoPE: relative 1e-5 (expf/cos/sin may differ in the last bit).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "tensor/dtype.h"
#include "tensor/quant.h"

namespace cadenza::kernels {
namespace {

using test::DevIndex;
using test::DevMatrix;
using test::get;
using test::put;
using test::put_idx;
using test::random_floats;

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    CADENZA_REQUIRE_CUDA();
    cpu = make_cpu_backend({.n_threads = 2});
    Result<std::unique_ptr<Backend>> g = make_cuda_backend();
    ASSERT_TRUE(g) << g.error();
    gpu = std::move(*g);
  }
  std::unique_ptr<Backend> cpu, gpu;
};

// A weight of `type` from random values, with its dequantized f32 values.
struct TestWeight {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // dequantized, [matrices][rows][cols]
  WeightDesc desc;
};

TestWeight make_weight(DType type, int64_t matrices, int64_t rows, int64_t cols, uint32_t seed) {
  TestWeight w;
  const std::vector<float> src = random_floats(static_cast<size_t>(matrices * rows * cols), seed);
  const size_t row = static_cast<size_t>(*row_bytes(type, cols));
  w.bytes.resize(row * static_cast<size_t>(matrices * rows));
  w.values.resize(src.size());
  for (int64_t r = 0; r < matrices * rows; ++r) {
    quantize_row(type, src.data() + r * cols, w.bytes.data() + static_cast<size_t>(r) * row, cols);
    dequantize_row(type, w.bytes.data() + static_cast<size_t>(r) * row, w.values.data() + r * cols, cols);
  }
  w.desc.name = "test." + std::string(dtype_name(type));
  w.desc.type = type;
  w.desc.cols = cols;
  w.desc.rows = rows;
  w.desc.matrices = matrices;
  w.desc.data = w.bytes.data();
  return w;
}

// Checks y [n][m] against the double reference of x [n][k] * w^T (matrix `matrix` of w).
void expect_matmul_close(const std::vector<float>& y, const std::vector<float>& x, const TestWeight& w,
                         int64_t matrix, int64_t n, double rel_bound, const std::string& what) {
  const int64_t m = w.desc.rows, k = w.desc.cols;
  const float* wm = w.values.data() + matrix * m * k;
  int bad = 0;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < m; ++j) {
      double ref = 0, mag = 0;
      for (int64_t i = 0; i < k; ++i) {
        ref += static_cast<double>(wm[j * k + i]) * x[static_cast<size_t>(t * k + i)];
        mag += std::abs(static_cast<double>(wm[j * k + i]) * x[static_cast<size_t>(t * k + i)]);
      }
      const double got = y[static_cast<size_t>(t * m + j)];
      if (!(std::abs(got - ref) <= rel_bound * mag + 1e-30) && bad++ < 5) {
        ADD_FAILURE() << what << ": y[" << t << "][" << j << "] = " << got << ", reference " << ref
                      << " (bound " << rel_bound * mag << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

struct MatmulCase {
  DType type;
  int64_t m, k;
};

std::vector<MatmulCase> matmul_cases() {
  return {{DType::F32, 96, 256},  {DType::F32, 37, 100},  {DType::F16, 96, 320},
          {DType::F16, 33, 100},  {DType::BF16, 80, 256}, {DType::Q8_0, 96, 320},
          {DType::Q4_K, 70, 512}, {DType::Q6_K, 40, 256}, {DType::Q4_0, 40, 96},
          // the low-bit types the giant MoE files ship in, decoded on the device
          {DType::Q2_K, 40, 512}, {DType::Q3_K, 40, 256}, {DType::IQ4_XS, 40, 512},
          {DType::MXFP4, 40, 96}};
}

TEST_F(CudaOps, MatmulMatchesReferenceAndIsBatchInvariant) {
  for (const MatmulCase& c : matmul_cases()) {
    const std::string what = std::string(dtype_name(c.type)) + " " + std::to_string(c.m) + "x" +
                             std::to_string(c.k);
    SCOPED_TRACE(what);
    TestWeight w = make_weight(c.type, 1, c.m, c.k, 11);
    Result<std::unique_ptr<Weight>> gw = gpu->upload_weight(w.desc);
    ASSERT_TRUE(gw) << gw.error();
    const double bound = static_cast<double>(c.k) * std::ldexp(1.0, -23);
    constexpr int64_t kBig = 130;  // tiled GEMM path
    const std::vector<float> x = random_floats(static_cast<size_t>(kBig * c.k), 5);
    DevMatrix gx = put(*gpu, x, kBig, c.k);
    std::vector<float> all;
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{9}, int64_t{70}, kBig}) {
      DevMatrix gy = test::zeros(*gpu, n, c.m);
      gpu->matmul(**gw, gx.m.row_range(0, n), gy.m);
      const std::vector<float> y = get(*gpu, gy);
      expect_matmul_close(y, x, w, 0, n, bound, what + " n=" + std::to_string(n));
      if (n == kBig) all = y;
    }
    // Batch invariance: rows computed alone (GEMV) or in a group of 5 equal the big call's rows.
    for (int64_t t : {int64_t{0}, int64_t{17}, int64_t{129}}) {
      DevMatrix one = test::zeros(*gpu, 1, c.m);
      gpu->matmul(**gw, gx.m.row_range(t, 1), one.m);
      const std::vector<float> y1 = get(*gpu, one);
      EXPECT_EQ(0, std::memcmp(y1.data(), all.data() + t * c.m, y1.size() * sizeof(float)))
          << "row " << t << " alone differs from the same row in a batch of " << kBig;
    }
    DevMatrix five = test::zeros(*gpu, 5, c.m);
    gpu->matmul(**gw, gx.m.row_range(40, 5), five.m);
    const std::vector<float> y5 = get(*gpu, five);
    EXPECT_EQ(0, std::memcmp(y5.data(), all.data() + 40 * c.m, y5.size() * sizeof(float)))
        << "rows 40..44 in a batch of 5 differ from the batch of " << kBig;
    // The CPU backend agrees to the same bound where it multiplies in f32.
    if (c.type == DType::F32 || c.type == DType::F16 || c.type == DType::BF16) {
      Result<std::unique_ptr<Weight>> cw = cpu->upload_weight(w.desc);
      ASSERT_TRUE(cw) << cw.error();
      DevMatrix cx = put(*cpu, x, kBig, c.k);
      DevMatrix cy = test::zeros(*cpu, kBig, c.m);
      cpu->matmul(**cw, cx.m, cy.m);
      EXPECT_LE(test::max_rel_diff(all, get(*cpu, cy), 1.0), 1e-4) << "against the cpu backend";
    }
  }
}

TEST_F(CudaOps, CublasPathMatchesReferenceWithinHalfPrecisionBound) {
  Result<std::unique_ptr<Backend>> fast = make_cuda_backend({.cublas_gemm = true});
  ASSERT_TRUE(fast) << fast.error();
  for (const MatmulCase& c : matmul_cases()) {
    const std::string what = std::string(dtype_name(c.type)) + " cuBLAS";
    SCOPED_TRACE(what);
    TestWeight w = make_weight(c.type, 1, c.m, c.k, 12);
    Result<std::unique_ptr<Weight>> gw = (*fast)->upload_weight(w.desc);
    ASSERT_TRUE(gw) << gw.error();
    const int64_t n = 70;
    const std::vector<float> x = random_floats(static_cast<size_t>(n * c.k), 6);
    DevMatrix gx = put(**fast, x, n, c.k);
    DevMatrix gy = test::zeros(**fast, n, c.m);
    (*fast)->matmul(**gw, gx.m, gy.m);
    expect_matmul_close(get(**fast, gy), x, w, 0, n, 1e-2, what);
  }
}

TEST_F(CudaOps, GetRowsDecodesExactlyLikeTheCpu) {
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K, DType::Q6_K,
                     DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::IQ4_XS, DType::MXFP4}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    TestWeight w = make_weight(type, 1, 50, 256, 21);
    Result<std::unique_ptr<Weight>> gw = gpu->upload_weight(w.desc);
    ASSERT_TRUE(gw) << gw.error();
    const std::vector<int32_t> ids = {7, 0, 49, 7, 23};
    DevIndex gids = put_idx(*gpu, ids, 5, 1);
    DevMatrix out = test::zeros(*gpu, 5, 256);
    gpu->get_rows(**gw, gids.m, out.m);
    const std::vector<float> got = get(*gpu, out);
    for (size_t t = 0; t < ids.size(); ++t) {
      EXPECT_EQ(0, std::memcmp(got.data() + t * 256, w.values.data() + ids[t] * 256, 256 * sizeof(float)))
          << "row " << ids[t];
    }
  }
}

TEST_F(CudaOps, GatherRowsCopiesRows) {
  const std::vector<float> src = random_floats(12 * 40, 3);
  DevMatrix gs = put(*gpu, src, 12, 40);
  DevIndex rows = put_idx(*gpu, {11, 0, 5, 5}, 4, 1);
  DevMatrix out = test::zeros(*gpu, 4, 40);
  gpu->gather_rows(gs.m, rows.m, out.m);
  const std::vector<float> got = get(*gpu, out);
  const int src_rows[] = {11, 0, 5, 5};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(0, std::memcmp(got.data() + i * 40, src.data() + src_rows[i] * 40, 40 * sizeof(float)));
  }
}

// Runs `op` on both backends over the same inputs and compares the outputs.
template <typename Op>
void compare_backends(Backend& a, Backend& b, const std::vector<std::vector<float>>& inputs, int64_t rows,
                      int64_t cols, double bound, Op&& op, const std::string& what) {
  std::vector<DevMatrix> ia, ib;
  for (const auto& v : inputs) {
    ia.push_back(put(a, v, rows, cols));
    ib.push_back(put(b, v, rows, cols));
  }
  DevMatrix oa = test::zeros(a, rows, cols), ob = test::zeros(b, rows, cols);
  op(a, ia, oa.m);
  op(b, ib, ob.m);
  const double d = test::max_rel_diff(get(a, oa), get(b, ob), 1e-3);
  EXPECT_LE(d, bound) << what;
}

TEST_F(CudaOps, ElementwiseOpsMatchCpu) {
  const int64_t rows = 9, cols = 1000;
  const auto a = random_floats(static_cast<size_t>(rows * cols), 1, -6.0f, 6.0f);
  const auto b = random_floats(static_cast<size_t>(rows * cols), 2, -3.0f, 3.0f);
  compare_backends(*gpu, *cpu, {a, b}, rows, cols, 1e-6,
                   [](Backend& be, std::vector<DevMatrix>& in, Matrix out) { be.add(in[0].m, in[1].m, out); }, "add");
  compare_backends(*gpu, *cpu, {a, b}, rows, cols, 1e-6,
                   [](Backend& be, std::vector<DevMatrix>& in, Matrix out) { be.mul(in[0].m, in[1].m, out); }, "mul");
  compare_backends(*gpu, *cpu, {a, b}, rows, cols, 1e-5,
                   [](Backend& be, std::vector<DevMatrix>& in, Matrix out) { be.swiglu(in[0].m, in[1].m, out); },
                   "swiglu");
  compare_backends(*gpu, *cpu, {a}, rows, cols, 1e-5,
                   [](Backend& be, std::vector<DevMatrix>& in, Matrix out) { be.sigmoid(in[0].m, out); }, "sigmoid");
  compare_backends(*gpu, *cpu, {a}, rows, cols, 1e-6,
                   [](Backend& be, std::vector<DevMatrix>& in, Matrix out) { be.scale(in[0].m, 0.22f, out); },
                   "scale");
  compare_backends(*gpu, *cpu, {a, b}, rows, cols, 1e-5,
                   [](Backend& be, std::vector<DevMatrix>& in, Matrix out) { be.geglu(in[0].m, in[1].m, out); },
                   "geglu");
  compare_backends(*gpu, *cpu, {a}, rows, cols, 1e-5,
                   [](Backend& be, std::vector<DevMatrix>& in, Matrix out) { be.softcap(in[0].m, 2.5f, out); },
                   "softcap");
  {
    std::vector<int32_t> pos(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) pos[static_cast<size_t>(r)] = static_cast<int32_t>(r * 37);
    DevIndex gp = put_idx(*gpu, pos, rows, 1), cp = put_idx(*cpu, pos, rows, 1);
    DevMatrix gx = put(*gpu, a, rows, cols), cx = put(*cpu, a, rows, cols);
    gpu->scale_by_position(gx.m, gp.m, 0.1f, 64, 1, gx.m);
    cpu->scale_by_position(cx.m, cp.m, 0.1f, 64, 1, cx.m);
    EXPECT_LE(test::max_rel_diff(get(*gpu, gx), get(*cpu, cx), 1e-3), 1e-6) << "scale_by_position";
  }
  // In place (out aliases the input).
  DevMatrix g = put(*gpu, a, rows, cols), c = put(*cpu, a, rows, cols);
  DevMatrix gb = put(*gpu, b, rows, cols), cb = put(*cpu, b, rows, cols);
  gpu->add(g.m, gb.m, g.m);
  cpu->add(c.m, cb.m, c.m);
  EXPECT_LE(test::max_rel_diff(get(*gpu, g), get(*cpu, c), 1e-3), 1e-6) << "add in place";
}

TEST_F(CudaOps, BiasAndRmsNormMatchCpu) {
  const int64_t rows = 7, cols = 2048;
  TestWeight vec = make_weight(DType::F32, 1, 1, cols, 9);
  TestWeight vec16 = make_weight(DType::F16, 1, 1, cols, 10);
  for (const TestWeight* v : {&vec, &vec16}) {
    Result<std::unique_ptr<Weight>> gv = gpu->upload_weight(v->desc);
    Result<std::unique_ptr<Weight>> cv = cpu->upload_weight(v->desc);
    ASSERT_TRUE(gv && cv);
    const auto x = random_floats(static_cast<size_t>(rows * cols), 4, -4.0f, 4.0f);
    compare_backends(*gpu, *cpu, {x}, rows, cols, 1e-6,
                     [&](Backend& be, std::vector<DevMatrix>& in, Matrix out) {
                       be.add_bias(in[0].m, &be == gpu.get() ? **gv : **cv, out);
                     },
                     "add_bias");
    compare_backends(*gpu, *cpu, {x}, rows, cols, 1e-5,
                     [&](Backend& be, std::vector<DevMatrix>& in, Matrix out) {
                       be.rms_norm(in[0].m, &be == gpu.get() ? **gv : **cv, 1e-5f, out);
                     },
                     "rms_norm");
  }
}

TEST_F(CudaOps, RopeMatchesCpuInBothLayoutsWithFactors) {
  const int32_t heads = 4, head_dim = 64;
  const int64_t rows = 6;
  TestWeight factors = make_weight(DType::F32, 1, 1, 16, 30);
  for (float& f : factors.values) f = 1.0f + std::abs(f) * 8.0f;
  factors.desc.data = factors.values.data();
  Result<std::unique_ptr<Weight>> gf = gpu->upload_weight(factors.desc);
  Result<std::unique_ptr<Weight>> cf = cpu->upload_weight(factors.desc);
  ASSERT_TRUE(gf && cf);
  const std::vector<int32_t> pos = {0, 1, 17, 511, 4095, 131071};
  for (RopeLayout layout : {RopeLayout::Normal, RopeLayout::NeoX}) {
    for (int32_t n_dims : {64, 32}) {
      for (bool with_factors : {false, true}) {
        const std::string what = std::string(layout == RopeLayout::NeoX ? "neox" : "normal") +
                                 " n_dims=" + std::to_string(n_dims) + (with_factors ? " factors" : "");
        const auto x = random_floats(static_cast<size_t>(rows * heads * head_dim), 8);
        DevMatrix g = put(*gpu, x, rows, heads * head_dim), c = put(*cpu, x, rows, heads * head_dim);
        DevIndex gp = put_idx(*gpu, pos, rows, 1), cp = put_idx(*cpu, pos, rows, 1);
        RopeParams p{.n_dims = n_dims, .freq_base = 500000.0f, .freq_scale = 0.5f, .layout = layout};
        if (with_factors && n_dims == 32) p.freq_factors = gf->get();
        gpu->rope(g.m, heads, head_dim, gp.m, p);
        if (p.freq_factors) p.freq_factors = cf->get();
        cpu->rope(c.m, heads, head_dim, cp.m, p);
        EXPECT_LE(test::max_rel_diff(get(*gpu, g), get(*cpu, c), 1e-3), 1e-5) << what;
      }
    }
  }
}

TEST_F(CudaOps, RoutingAndSlotSumMatchCpu) {
  const int64_t n = 20, experts = 8, k = 3;
  const auto logits = random_floats(static_cast<size_t>(n * experts), 40, -3.0f, 3.0f);
  for (bool normalize : {true, false}) {
    const RoutingParams p{.normalize_top_k = normalize, .scale = normalize ? 1.0f : 2.5f};
    DevMatrix gl = put(*gpu, logits, n, experts), cl = put(*cpu, logits, n, experts);
    DevIndex gi = put_idx(*gpu, std::vector<int32_t>(n * k, 0), n, k);
    DevIndex ci = put_idx(*cpu, std::vector<int32_t>(n * k, 0), n, k);
    DevMatrix gw = test::zeros(*gpu, n, k), cw = test::zeros(*cpu, n, k);
    gpu->route_experts(gl.m, p, gi.m, gw.m);
    cpu->route_experts(cl.m, p, ci.m, cw.m);
    EXPECT_EQ(test::get_idx(*gpu, gi), test::get_idx(*cpu, ci));
    EXPECT_LE(test::max_rel_diff(get(*gpu, gw), get(*cpu, cw), 1e-3), 1e-5);
  }
  const int64_t d = 300;
  const auto slots = random_floats(static_cast<size_t>(n * k * d), 41);
  const auto weights = random_floats(static_cast<size_t>(n * k), 42, 0.0f, 1.0f);
  DevMatrix gs = put(*gpu, slots, n * k, d), cs = put(*cpu, slots, n * k, d);
  DevMatrix gw = put(*gpu, weights, n, k), cw = put(*cpu, weights, n, k);
  DevMatrix go = test::zeros(*gpu, n, d), co = test::zeros(*cpu, n, d);
  gpu->weighted_sum_slots(gs.m, gw.m, go.m);
  cpu->weighted_sum_slots(cs.m, cw.m, co.m);
  EXPECT_TRUE(test::bitwise_equal(get(*gpu, go), get(*cpu, co)));
}

TEST_F(CudaOps, ExpertMatmulMatchesReferenceAndTheDenseKernel) {
  const int64_t experts = 4, m = 40, k = 256, n = 6, slots = 2;
  for (DType type : {DType::F16, DType::Q8_0, DType::Q4_K, DType::Q2_K, DType::MXFP4}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    TestWeight w = make_weight(type, experts, m, k, 50);
    Result<std::unique_ptr<Weight>> gw = gpu->upload_weight(w.desc);
    ASSERT_TRUE(gw) << gw.error();
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < n; ++t) {
      ids.push_back(static_cast<int32_t>(t % experts));
      ids.push_back(static_cast<int32_t>((t + 1 + t / 2) % experts));
    }
    DevIndex gids = put_idx(*gpu, ids, n, slots);
    for (bool per_slot : {false, true}) {
      const int64_t x_rows = per_slot ? n * slots : n;
      const auto x = random_floats(static_cast<size_t>(x_rows * k), 51);
      DevMatrix gx = put(*gpu, x, x_rows, k);
      DevMatrix gy = test::zeros(*gpu, n * slots, m);
      gpu->matmul_experts(**gw, gx.m, gids.m, gy.m);
      const std::vector<float> y = get(*gpu, gy);
      for (int64_t p = 0; p < n * slots; ++p) {
        const int64_t xr = per_slot ? p : p / slots;
        const std::vector<float> xrow(x.begin() + xr * k, x.begin() + (xr + 1) * k);
        const std::vector<float> yrow(y.begin() + p * m, y.begin() + (p + 1) * m);
        expect_matmul_close(yrow, xrow, w, ids[static_cast<size_t>(p)], 1,
                            static_cast<double>(k) * std::ldexp(1.0, -23), "pair " + std::to_string(p));
        // The dense kernel on that expert's matrix alone gives the same bits.
        WeightDesc one = w.desc;
        one.matrices = 1;
        one.data = w.bytes.data() + static_cast<size_t>(ids[static_cast<size_t>(p)]) *
                                        static_cast<size_t>(*row_bytes(type, k)) * m;
        Result<std::unique_ptr<Weight>> dense = gpu->upload_weight(one);
        ASSERT_TRUE(dense) << dense.error();
        DevMatrix dy = test::zeros(*gpu, 1, m);
        gpu->matmul(**dense, gx.m.row_range(xr, 1), dy.m);
        EXPECT_TRUE(test::bitwise_equal(get(*gpu, dy), yrow)) << "pair " << p;
      }
    }
  }
}

TEST_F(CudaOps, OutOfMemoryIsAClearError) {
  Result<std::unique_ptr<Buffer>> huge = gpu->allocate(size_t{1} << 52);  // 4 PiB
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().find("out of GPU memory"), std::string::npos) << huge.error();
  EXPECT_NE(huge.error().find("MiB free"), std::string::npos) << huge.error();
  // The backend still works afterwards.
  DevMatrix x = put(*gpu, {1.0f, 2.0f}, 1, 2);
  EXPECT_EQ(get(*gpu, x), (std::vector<float>{1.0f, 2.0f}));
}

TEST_F(CudaOps, SupportsTheCpuKvTypes) {
  EXPECT_TRUE(gpu->supports_kv_type(DType::F32));
  EXPECT_TRUE(gpu->supports_kv_type(DType::F16));
  EXPECT_TRUE(gpu->supports_kv_type(DType::Q8_0));
  EXPECT_FALSE(gpu->supports_kv_type(DType::Q4_K));
  EXPECT_FALSE(gpu->supports_kv_type(DType::BF16));
}

}  // namespace
}  // namespace cadenza::kernels
