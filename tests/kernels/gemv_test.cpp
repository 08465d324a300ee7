// GEMV/GEMM kernels at every ISA level against the scalar reference, on fresh random data.
//
// Tolerances (see dot_tolerance in simd_test_util.h): the integer block dot products are exact at
// every level, so SIMD and reference differ only by float rounding of the scale products and the
// order of the float sums. Per dot product: |simd - ref| <= (terms + 8) * 2^-23 * A, where terms
// is the number of float terms summed (blocks: k/32, 2 * k/256 for Q4_K, k/256 for Q6_K; elements
// for F16/BF16) and A the sum of their magnitudes (computed below per type, an upper bound that
// holds whatever the summation order). The same bound checks the reference against the exact dot
// product of tensor/quant.h's dequantized rows (in double), so the block math itself is tested
// against an independent decoder.
// Within one level results must be bitwise reproducible: gemm over n rows equals n gemv calls
// (batch invariance) and a row range split gives the same floats.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/simd/kernels.h"
#include "simd_test_util.h"

namespace cadenza::simd::testing {
namespace {

struct TypeCase {
  DType w;
  std::vector<int64_t> ks;
};

const TypeCase kCases[] = {
    {DType::Q8_0, {32, 64, 96, 160, 512, 1056}},
    {DType::Q4_0, {32, 64, 96, 160, 512, 1056}},
    {DType::Q4_K, {256, 512, 768, 2304}},
    {DType::Q6_K, {256, 512, 768, 2304}},
    {DType::Q2_K, {256, 512, 768, 2304}},
    {DType::Q3_K, {256, 512, 768, 2304}},
    {DType::IQ4_XS, {256, 512, 768, 2304}},
    {DType::IQ4_NL, {32, 64, 96, 160, 512, 1056}},
    {DType::MXFP4, {32, 64, 96, 160, 512, 1056}},
    {DType::IQ2_XXS, {256, 512, 768, 2304}},
    {DType::IQ2_XS, {256, 512, 768, 2304}},
    {DType::IQ2_S, {256, 512, 768, 2304}},
    {DType::IQ3_XXS, {256, 512, 768, 2304}},
    {DType::IQ3_S, {256, 512, 768, 2304}},
    {DType::IQ1_S, {256, 512, 768, 2304}},
    {DType::IQ1_M, {256, 512, 768, 2304}},
    {DType::F16, {1, 7, 15, 16, 17, 31, 33, 48, 100, 256, 1000}},
    {DType::BF16, {1, 7, 15, 16, 17, 31, 33, 48, 100, 256, 1000}},
};

std::string case_name(const ::testing::TestParamInfo<std::tuple<Isa, int>>& info) {
  return std::string(isa_name(std::get<0>(info.param))) + "_" +
         std::string(dtype_name(kCases[std::get<1>(info.param)].w));
}

bool is_half(DType t) { return t == DType::F16 || t == DType::BF16; }

// The grid types' kernels (GridKernel, ref.cpp's dot_grid) do the reference's float operations in
// its order after exact integer sums: the same result bit for bit at every level.
bool bit_exact_with_reference(DType t) {
  switch (t) {
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ1_S:
    case DType::IQ1_M: return true;
    default: return false;
  }
}

// Activations in the weight type's activation format: quantized rows, or the f32 rows as bytes.
struct Acts {
  std::vector<float> f;
  std::vector<uint8_t> q;
  int64_t row_bytes = 0;
  const void* ptr() const { return q.empty() ? static_cast<const void*>(f.data()) : q.data(); }
  const uint8_t* row(int64_t j) const { return static_cast<const uint8_t*>(ptr()) + j * row_bytes; }
};

Acts make_acts(Rng& rng, DType w, int64_t n, int64_t k) {
  Acts a;
  a.f = random_activations(rng, n, k);
  a.row_bytes = *activation_row_bytes(w, k);
  if (!is_half(w)) {
    a.q.resize(static_cast<size_t>(n * a.row_bytes));
    for (int64_t j = 0; j < n; ++j)
      quantize_row(*activation_dtype(w), &a.f[j * k], &a.q[j * a.row_bytes], k);
  }
  return a;
}

void call_gemm(DType t, const void* w, int64_t rows, int64_t k, const void* a, int64_t n,
               float* out, int64_t ldo) {
  const auto* x = static_cast<const float*>(a);
  switch (t) {
    case DType::Q8_0: gemm_q8_0(w, rows, k, a, n, out, ldo); break;
    case DType::Q4_0: gemm_q4_0(w, rows, k, a, n, out, ldo); break;
    case DType::Q4_K: gemm_q4_k(w, rows, k, a, n, out, ldo); break;
    case DType::Q6_K: gemm_q6_k(w, rows, k, a, n, out, ldo); break;
    case DType::Q2_K: gemm_q2_k(w, rows, k, a, n, out, ldo); break;
    case DType::Q3_K: gemm_q3_k(w, rows, k, a, n, out, ldo); break;
    case DType::IQ4_XS: gemm_iq4_xs(w, rows, k, a, n, out, ldo); break;
    case DType::IQ4_NL: gemm_iq4_nl(w, rows, k, a, n, out, ldo); break;
    case DType::MXFP4: gemm_mxfp4(w, rows, k, a, n, out, ldo); break;
    case DType::IQ2_XXS: gemm_iq2_xxs(w, rows, k, a, n, out, ldo); break;
    case DType::IQ3_S: gemm_iq3_s(w, rows, k, a, n, out, ldo); break;
    case DType::IQ1_S: gemm_iq1_s(w, rows, k, a, n, out, ldo); break;
    case DType::IQ1_M: gemm_iq1_m(w, rows, k, a, n, out, ldo); break;
    case DType::IQ3_XXS: gemm_iq3_xxs(w, rows, k, a, n, out, ldo); break;
    case DType::IQ2_S: gemm_iq2_s(w, rows, k, a, n, out, ldo); break;
    case DType::IQ2_XS: gemm_iq2_xs(w, rows, k, a, n, out, ldo); break;
    case DType::F16: gemm_f16(w, rows, k, x, n, out, ldo); break;
    case DType::BF16: gemm_bf16(w, rows, k, x, n, out, ldo); break;
    default: FAIL();
  }
}

void call_gemv(DType t, const void* w, int64_t rows, int64_t k, const void* a, float* out) {
  const auto* x = static_cast<const float*>(a);
  switch (t) {
    case DType::Q8_0: gemv_q8_0(w, rows, k, a, out); break;
    case DType::Q4_0: gemv_q4_0(w, rows, k, a, out); break;
    case DType::Q4_K: gemv_q4_k(w, rows, k, a, out); break;
    case DType::Q6_K: gemv_q6_k(w, rows, k, a, out); break;
    case DType::Q2_K: gemv_q2_k(w, rows, k, a, out); break;
    case DType::Q3_K: gemv_q3_k(w, rows, k, a, out); break;
    case DType::IQ4_XS: gemv_iq4_xs(w, rows, k, a, out); break;
    case DType::IQ4_NL: gemv_iq4_nl(w, rows, k, a, out); break;
    case DType::MXFP4: gemv_mxfp4(w, rows, k, a, out); break;
    case DType::IQ2_XXS: gemv_iq2_xxs(w, rows, k, a, out); break;
    case DType::IQ3_S: gemv_iq3_s(w, rows, k, a, out); break;
    case DType::IQ1_S: gemv_iq1_s(w, rows, k, a, out); break;
    case DType::IQ1_M: gemv_iq1_m(w, rows, k, a, out); break;
    case DType::IQ3_XXS: gemv_iq3_xxs(w, rows, k, a, out); break;
    case DType::IQ2_S: gemv_iq2_s(w, rows, k, a, out); break;
    case DType::IQ2_XS: gemv_iq2_xs(w, rows, k, a, out); break;
    case DType::F16: gemv_f16(w, rows, k, x, out); break;
    case DType::BF16: gemv_bf16(w, rows, k, x, out); break;
    default: FAIL();
  }
}

void call_ref(DType t, const void* w, int64_t rows, int64_t k, const void* a, float* out) {
  const auto* x = static_cast<const float*>(a);
  switch (t) {
    case DType::Q8_0: ref::gemm_q8_0(w, rows, k, a, 1, out, rows); break;
    case DType::Q4_0: ref::gemm_q4_0(w, rows, k, a, 1, out, rows); break;
    case DType::Q4_K: ref::gemm_q4_k(w, rows, k, a, 1, out, rows); break;
    case DType::Q6_K: ref::gemm_q6_k(w, rows, k, a, 1, out, rows); break;
    case DType::Q2_K: ref::gemm_q2_k(w, rows, k, a, 1, out, rows); break;
    case DType::Q3_K: ref::gemm_q3_k(w, rows, k, a, 1, out, rows); break;
    case DType::IQ4_XS: ref::gemm_iq4_xs(w, rows, k, a, 1, out, rows); break;
    case DType::IQ4_NL: ref::gemm_iq4_nl(w, rows, k, a, 1, out, rows); break;
    case DType::MXFP4: ref::gemm_mxfp4(w, rows, k, a, 1, out, rows); break;
    case DType::IQ2_XXS: ref::gemm_iq2_xxs(w, rows, k, a, 1, out, rows); break;
    case DType::IQ3_S: ref::gemm_iq3_s(w, rows, k, a, 1, out, rows); break;
    case DType::IQ1_S: ref::gemm_iq1_s(w, rows, k, a, 1, out, rows); break;
    case DType::IQ1_M: ref::gemm_iq1_m(w, rows, k, a, 1, out, rows); break;
    case DType::IQ3_XXS: ref::gemm_iq3_xxs(w, rows, k, a, 1, out, rows); break;
    case DType::IQ2_S: ref::gemm_iq2_s(w, rows, k, a, 1, out, rows); break;
    case DType::IQ2_XS: ref::gemm_iq2_xs(w, rows, k, a, 1, out, rows); break;
    case DType::F16: ref::gemm_f16(w, rows, k, x, 1, out, rows); break;
    case DType::BF16: ref::gemm_bf16(w, rows, k, x, 1, out, rows); break;
    default: FAIL();
  }
}

template <typename B>
B block_at(const uint8_t* p, int64_t i) {
  B b;
  std::memcpy(&b, p + i * static_cast<int64_t>(sizeof(B)), sizeof b);
  return b;
}

// The exact dot product from tensor/quant.h's decoders (double), the number of float terms the
// kernels sum, and A (the magnitude bound of those terms).
struct Exact {
  double value = 0, abs_sum = 0;
  int64_t terms = 0;
};

Exact exact_dot(DType t, const uint8_t* w, const uint8_t* a, const float* xf, int64_t k) {
  Exact e;
  std::vector<float> wd(static_cast<size_t>(k)), ad(static_cast<size_t>(k));
  dequantize_row(t, w, wd.data(), k);
  if (is_half(t))
    std::copy(xf, xf + k, ad.begin());
  else
    dequantize_row(*activation_dtype(t), a, ad.data(), k);
  for (int64_t i = 0; i < k; ++i) e.value += double(wd[i]) * double(ad[i]);
  switch (t) {
    case DType::Q8_0:
    case DType::Q4_0:
      e.terms = k / 32;
      for (int64_t b = 0; b < k / 32; ++b) {
        const auto ab = block_at<BlockQ8_0>(a, b);
        double s = 0;
        if (t == DType::Q8_0) {
          const auto wb = block_at<BlockQ8_0>(w, b);
          for (int i = 0; i < 32; ++i) s += std::abs(double(wb.qs[i]) * ab.qs[i]);
          e.abs_sum += std::abs(double(fp16_to_fp32(wb.d)) * fp16_to_fp32(ab.d)) * s;
        } else {
          const auto wb = block_at<BlockQ4_0>(w, b);
          for (int i = 0; i < 16; ++i)
            s += std::abs(double((wb.qs[i] & 15) - 8) * ab.qs[i]) +
                 std::abs(double((wb.qs[i] >> 4) - 8) * ab.qs[i + 16]);
          e.abs_sum += std::abs(double(fp16_to_fp32(wb.d)) * fp16_to_fp32(ab.d)) * s;
        }
      }
      break;
    case DType::Q4_K:  // |q| <= 15: A <= sum |da| (|d| sc 15 + |dmin| mn) sum|a| per sub-block
      e.terms = 2 * (k / 256);
      for (int64_t b = 0; b < k / 256; ++b) {
        const auto wb = block_at<BlockQ4_K>(w, b);
        const auto ab = block_at<BlockQ8_K>(a, b);
        for (int j = 0; j < 8; ++j) {
          int sc, mn;
          unpack_scale_min_k4(j, wb.scales, &sc, &mn);
          double asum = 0;
          for (int i = 0; i < 32; ++i) asum += std::abs(double(ab.qs[32 * j + i]));
          e.abs_sum += std::abs(double(ab.d)) *
                       (std::abs(double(fp16_to_fp32(wb.d))) * sc * 15 +
                        std::abs(double(fp16_to_fp32(wb.dmin))) * mn) * asum;
        }
      }
      break;
    case DType::Q6_K:  // 0 <= q <= 63, the -32 applied separately: A <= |da d| |sc| 95 sum|a|
      e.terms = k / 256;
      for (int64_t b = 0; b < k / 256; ++b) {
        const auto wb = block_at<BlockQ6_K>(w, b);
        const auto ab = block_at<BlockQ8_K>(a, b);
        for (int j = 0; j < 16; ++j) {
          double asum = 0;
          for (int i = 0; i < 16; ++i) asum += std::abs(double(ab.qs[16 * j + i]));
          e.abs_sum += std::abs(double(ab.d) * fp16_to_fp32(wb.d)) * std::abs(wb.scales[j]) * 95 * asum;
        }
      }
      break;
    case DType::Q2_K:  // q <= 3, mn <= 15: A <= sum |da| (|d| sc 3 + |dmin| mn) sum|a| per sub-block
      e.terms = 2 * (k / 256);
      for (int64_t b = 0; b < k / 256; ++b) {
        const auto wb = block_at<BlockQ2_K>(w, b);
        const auto ab = block_at<BlockQ8_K>(a, b);
        for (int j = 0; j < 16; ++j) {
          double asum = 0;
          for (int i = 0; i < 16; ++i) asum += std::abs(double(ab.qs[16 * j + i]));
          e.abs_sum += std::abs(double(ab.d)) *
                       (std::abs(double(fp16_to_fp32(wb.d))) * (wb.scales[j] & 15) * 3 +
                        std::abs(double(fp16_to_fp32(wb.dmin))) * (wb.scales[j] >> 4)) * asum;
        }
      }
      break;
    case DType::Q3_K:  // the kernels compute sum (q + 4) a - 4 sum a: A <= |da d| 32 * 11 sum|a|
    case DType::IQ4_XS: {  // |v| <= 127, |ls - 32| <= 32
      e.terms = k / 256;
      const size_t bytes = t == DType::Q3_K ? sizeof(BlockQ3_K) : sizeof(BlockIQ4_XS);
      const double per = t == DType::Q3_K ? 32.0 * 11 : 32.0 * 127;
      for (int64_t b = 0; b < k / 256; ++b) {
        uint16_t d;
        std::memcpy(&d, w + b * bytes + (t == DType::Q3_K ? offsetof(BlockQ3_K, d) : 0), 2);
        const auto ab = block_at<BlockQ8_K>(a, b);
        double asum = 0;
        for (int i = 0; i < 256; ++i) asum += std::abs(double(ab.qs[i]));
        e.abs_sum += std::abs(double(ab.d) * fp16_to_fp32(d)) * per * asum;
      }
      break;
    }
    case DType::IQ2_XXS:  // one float term per super-block; |decoded w| |a| from the decoded rows
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ1_S:
    case DType::IQ1_M:
      e.terms = k / 256;
      for (int64_t i = 0; i < k; ++i) e.abs_sum += std::abs(double(wd[i]) * ad[i]);
      break;
    case DType::IQ4_NL:
    case DType::MXFP4:  // per block |dw da| sum |decoded w / dw| |a|: from the decoded rows
      e.terms = k / 32;
      for (int64_t i = 0; i < k; ++i) e.abs_sum += std::abs(double(wd[i]) * ad[i]);
      break;
    default:  // F16, BF16
      e.terms = k;
      for (int64_t i = 0; i < k; ++i) e.abs_sum += std::abs(double(wd[i]) * xf[i]);
      break;
  }
  return e;
}

class GemvTest : public ::testing::TestWithParam<std::tuple<Isa, int>> {
 protected:
  void SetUp() override {
    if (isa() > detected_isa())
      GTEST_SKIP() << "SKIPPED: " << isa_name(isa()) << " not available on this CPU ("
                   << cpu_features().why << ")";
  }
  Isa isa() const { return std::get<0>(GetParam()); }
  const TypeCase& tc() const { return kCases[std::get<1>(GetParam())]; }
};

TEST_P(GemvTest, MatchesReferenceWithinRoundingBound) {
  SCOPED_TRACE(seed_trace());
  IsaScope scope(isa());
  ASSERT_EQ(scope.got(), isa());
  const DType t = tc().w;
  Rng rng(test_seed() ^ (uint64_t(std::get<1>(GetParam())) << 32));
  for (int64_t k : tc().ks) {
    for (int64_t rows : {1, 3, 17}) {
      for (bool realistic : {false, true}) {
        SCOPED_TRACE("k=" + std::to_string(k) + " rows=" + std::to_string(rows) +
                     (realistic ? " quantized N(0,1) weights" : " random-bit weights"));
        std::vector<uint8_t> w = random_weights(rng, t, rows, k, realistic);
        Acts a = make_acts(rng, t, 1, k);
        std::vector<float> got(static_cast<size_t>(rows)), want(got.size());
        call_gemv(t, w.data(), rows, k, a.ptr(), got.data());
        call_ref(t, w.data(), rows, k, a.ptr(), want.data());
        const int64_t wrb = static_cast<int64_t>(*row_bytes(t, k));
        for (int64_t r = 0; r < rows; ++r) {
          const Exact e = exact_dot(t, &w[r * wrb], a.row(0), a.f.data(), k);
          const double tol = dot_tolerance(e.terms, e.abs_sum);
          EXPECT_LE(std::abs(double(got[r]) - want[r]), tol)
              << "row " << r << ": " << isa_name(isa()) << " " << got[r] << " vs reference " << want[r];
          if (bit_exact_with_reference(t)) {
            EXPECT_EQ(std::memcmp(&got[r], &want[r], sizeof(float)), 0)
                << "row " << r << ": " << isa_name(isa()) << " " << got[r] << " vs reference " << want[r]
                << " (the grid kernels reproduce the reference bit for bit)";
          }
          if (isa() == Isa::scalar) {
            EXPECT_EQ(got[r], want[r]) << "scalar level must be the reference";
            EXPECT_LE(std::abs(double(want[r]) - e.value), tol)
                << "row " << r << ": reference " << want[r] << " vs dequantized dot " << e.value;
          }
        }
      }
    }
  }
}

// gemm over n activation rows == n gemv calls, bitwise; only out[j * ldo + r], r < rows, written.
TEST_P(GemvTest, BatchedEqualsSingleCallsBitwise) {
  SCOPED_TRACE(seed_trace());
  IsaScope scope(isa());
  const DType t = tc().w;
  Rng rng(test_seed() ^ (uint64_t(std::get<1>(GetParam())) << 32) ^ 0x5151);
  const int64_t k = tc().ks[tc().ks.size() / 2], rows = 13, ldo = rows + 3;
  std::vector<uint8_t> w = random_weights(rng, t, rows, k, false);
  // n beyond 9 spans several of gemm_driver.inc's activation blocks (24 KiB of activations).
  for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 37, 70}) {
    SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k));
    Acts a = make_acts(rng, t, n, k);
    const float sentinel = -12345.5f;
    std::vector<float> batched(static_cast<size_t>(n * ldo), sentinel);
    call_gemm(t, w.data(), rows, k, a.ptr(), n, batched.data(), ldo);
    for (int64_t j = 0; j < n; ++j) {
      std::vector<float> single(static_cast<size_t>(rows));
      call_gemv(t, w.data(), rows, k, a.row(j), single.data());
      for (int64_t r = 0; r < rows; ++r)
        ASSERT_EQ(std::memcmp(&batched[j * ldo + r], &single[r], sizeof(float)), 0)
            << "activation " << j << " row " << r << ": " << batched[j * ldo + r] << " vs "
            << single[r];
      for (int64_t r = rows; r < ldo; ++r) ASSERT_EQ(batched[j * ldo + r], sentinel);
    }
  }
}

// Splitting the rows (as threads do) changes nothing.
TEST_P(GemvTest, RowSplitGivesSameResult) {
  SCOPED_TRACE(seed_trace());
  IsaScope scope(isa());
  const DType t = tc().w;
  Rng rng(test_seed() ^ (uint64_t(std::get<1>(GetParam())) << 32) ^ 0xa5a5);
  const int64_t k = tc().ks.back(), rows = 11;
  std::vector<uint8_t> w = random_weights(rng, t, rows, k, false);
  Acts a = make_acts(rng, t, 1, k);
  std::vector<float> whole(static_cast<size_t>(rows)), parts(whole.size());
  call_gemv(t, w.data(), rows, k, a.ptr(), whole.data());
  const int64_t wrb = static_cast<int64_t>(*row_bytes(t, k));
  for (int64_t r0 = 0, step = 1; r0 < rows; r0 += step, ++step) {
    const int64_t r1 = std::min(rows, r0 + step);
    call_gemv(t, w.data() + r0 * wrb, r1 - r0, k, a.ptr(), parts.data() + r0);
  }
  EXPECT_EQ(std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Levels, GemvTest,
                         ::testing::Combine(::testing::ValuesIn(all_levels()),
                                            ::testing::Range(0, int(std::size(kCases)))),
                         case_name);

// The DType-generic entry points.
TEST(SimdByType, QuantizeAndGemmByDType) {
  SCOPED_TRACE(seed_trace());
  Rng rng(test_seed() ^ 77);
  for (const TypeCase& tc : kCases) {
    const DType t = tc.w;
    const int64_t k = tc.ks.back(), rows = 5, n = 3;
    SCOPED_TRACE(std::string(dtype_name(t)));
    std::vector<uint8_t> w = random_weights(rng, t, rows, k, false);
    std::vector<float> x = random_activations(rng, n, k);
    Result<int64_t> arb = activation_row_bytes(t, k);
    ASSERT_TRUE(arb.ok());
    std::vector<uint8_t> act(static_cast<size_t>(*arb * n));
    ASSERT_TRUE(quantize_activations(t, x.data(), k, n, act.data()).ok());
    const void* ap = is_half(t) ? static_cast<const void*>(x.data()) : act.data();
    std::vector<float> got(static_cast<size_t>(rows * n)), want(got.size());
    ASSERT_TRUE(gemm(t, w.data(), rows, k, ap, n, got.data(), rows).ok());
    call_gemm(t, w.data(), rows, k, ap, n, want.data(), rows);
    EXPECT_EQ(got, want);
  }
  float out = 0;
  Status bad_type = gemm(DType::Q5_K, nullptr, 1, 256, nullptr, 1, &out, 1);
  EXPECT_EQ(activation_dtype(DType::Q2_K), DType::Q8_K);
  EXPECT_EQ(activation_dtype(DType::IQ4_XS), DType::Q8_K);
  EXPECT_EQ(activation_dtype(DType::MXFP4), DType::Q8_0);
  EXPECT_EQ(activation_dtype(DType::IQ4_NL), DType::Q8_0);
  EXPECT_EQ(activation_dtype(DType::IQ2_XXS), DType::Q8_K);
  EXPECT_EQ(activation_dtype(DType::IQ3_S), DType::Q8_K);
  EXPECT_EQ(activation_dtype(DType::IQ1_S), DType::Q8_K);
  EXPECT_EQ(activation_dtype(DType::IQ1_M), DType::Q8_K);
  EXPECT_FALSE(activation_dtype(DType::Q5_K).has_value());
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.error().find("q5_K"), std::string::npos) << bad_type.error();
  Status bad_k = gemm(DType::Q4_K, nullptr, 1, 100, nullptr, 1, &out, 1);
  ASSERT_FALSE(bad_k.ok());
  EXPECT_NE(bad_k.error().find("100"), std::string::npos) << bad_k.error();
  EXPECT_FALSE(gemm(DType::Q8_0, nullptr, 4, 64, nullptr, 2, &out, 3).ok());  // ldo < rows
  EXPECT_FALSE(activation_row_bytes(DType::F32, 8).ok());
  EXPECT_EQ(activation_dtype(DType::Q6_K), DType::Q8_K);
  EXPECT_EQ(activation_dtype(DType::Q4_0), DType::Q8_0);
  EXPECT_EQ(activation_dtype(DType::BF16), DType::F32);
}

}  // namespace
}  // namespace cadenza::simd::testing
