// The repacked Q8_0/Q4_0/Q5_0/IQ4_NL/MXFP4/Q4_K/Q5_K/Q6_K kernels (kernels/simd/repack.h): the scalar reference against the
// exact dot product, the VNNI kernel bit for bit against the reference (any n, any row range), and
// the activation format against tensor/quant.h's Q8_0 quantizer.
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/simd/kernels.h"
#include "kernels/simd/repack.h"
#include "simd_test_util.h"

namespace cadenza::simd::testing {
namespace {

constexpr DType kTypes[] = {DType::Q8_0,  DType::Q4_0, DType::Q5_0, DType::IQ4_NL,
                            DType::MXFP4, DType::Q4_K, DType::Q5_K, DType::Q6_K};
constexpr DType kBlock32Types[] = {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::IQ4_NL, DType::MXFP4};

std::vector<uint8_t> quantize_acts(DType t, const std::vector<float>& x, int64_t n, int64_t k) {
  const int64_t ab = repack_act_row_bytes(t, k);
  std::vector<uint8_t> a(static_cast<size_t>(n * ab));
  for (int64_t j = 0; j < n; ++j) repack_quantize_act(t, x.data() + j * k, k, a.data() + j * ab);
  return a;
}

TEST(Repack, Q4_KAndQ5_KActivationFormatIsQ8_KWithPairSums) {
  SCOPED_TRACE(seed_trace());
  Rng rng(test_seed() + 3);
  const int64_t k = 512;
  const std::vector<float> x = random_activations(rng, 1, k);
  std::vector<BlockQ8_K> q(k / 256);
  quantize_row(DType::Q8_K, x.data(), q.data(), k);
  for (DType t : {DType::Q4_K, DType::Q5_K}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const std::vector<uint8_t> a = quantize_acts(t, x, 1, k);
    const int64_t nb = k / 256;
    for (int64_t b = 0; b < nb; ++b) {
      float da;
      std::memcpy(&da, &a[4 * b], 4);
      EXPECT_EQ(da, q[b].d);
      for (int p = 0; p < 4; ++p) {
        int16_t pair[2];
        std::memcpy(pair, &a[4 * nb + 16 * b + 4 * p], 4);
        for (int e = 0; e < 2; ++e) {
          int32_t sum = 0;
          for (int i = 0; i < 32; ++i) sum += q[b].qs[64 * p + 32 * e + i];
          EXPECT_EQ(pair[e], sum);
        }
      }
      EXPECT_EQ(0, std::memcmp(&a[20 * nb + 256 * b], q[b].qs, 256));
    }
  }
}

TEST(Repack, ActivationFormatIsQ8_0WithOffsetSums) {
  SCOPED_TRACE(seed_trace());
  Rng rng(test_seed());
  const int64_t k = 256;
  const std::vector<float> x = random_activations(rng, 1, k);
  std::vector<BlockQ8_0> q(k / 32);
  quantize_row(DType::Q8_0, x.data(), q.data(), k);
  for (DType t : kBlock32Types) {
    const std::vector<uint8_t> a = quantize_acts(t, x, 1, k);
    const int32_t offset = t == DType::Q4_0 ? 8 : t == DType::Q5_0 ? 16 : 128;  // Q8_0, IQ4_NL, MXFP4
    for (int64_t b = 0; b < k / 32; ++b) {
      float da;
      int32_t corr;
      std::memcpy(&da, &a[4 * b], 4);
      std::memcpy(&corr, &a[4 * (k / 32) + 4 * b], 4);
      EXPECT_EQ(da, fp16_to_fp32(q[b].d));
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) sum += q[b].qs[i];
      EXPECT_EQ(corr, offset * sum);
      EXPECT_EQ(0, std::memcmp(&a[8 * (k / 32) + 32 * b], q[b].qs, 32));
    }
  }
}

TEST(Repack, ReferenceMatchesExactDotProduct) {
  SCOPED_TRACE(seed_trace());
  Rng rng(test_seed() + 1);
  for (DType t : kTypes) {
    for (bool realistic : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (realistic ? " realistic" : " random bits"));
      const bool kq = t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
      const int64_t rows = 5, k = kq ? 256 * 3 : 32 * 13, n = 3;
      const std::vector<uint8_t> w = random_weights(rng, t, rows, k, realistic);
      const std::vector<float> x = random_activations(rng, n, k);
      const std::vector<uint8_t> a = quantize_acts(t, x, n, k);
      std::vector<float> out(static_cast<size_t>(n * rows));
      ref::repack_gemm(t, w.data(), rows, k, a.data(), n, out.data(), rows);
      const int64_t rb = static_cast<int64_t>(*row_bytes(t, k));
      std::vector<float> wf(static_cast<size_t>(k)), af(static_cast<size_t>(k));
      const DType at = kq ? DType::Q8_K : DType::Q8_0;
      std::vector<uint8_t> qa(static_cast<size_t>(*row_bytes(at, k)));
      for (int64_t j = 0; j < n; ++j) {
        quantize_row(at, x.data() + j * k, qa.data(), k);
        dequantize_row(at, qa.data(), af.data(), k);
        for (int64_t r = 0; r < rows; ++r) {
          dequantize_row(t, w.data() + r * rb, wf.data(), k);
          double exact = 0, abs_sum = 0;
          for (int64_t i = 0; i < k; ++i) {
            exact += static_cast<double>(wf[i]) * af[i];
            abs_sum += std::abs(static_cast<double>(wf[i]) * af[i]);
          }
          const int64_t terms = t == DType::Q4_K || t == DType::Q5_K ? 2 * k / 256 : t == DType::Q6_K ? k / 256 : k / 32;
          EXPECT_NEAR(out[j * rows + r], exact, dot_tolerance(terms, abs_sum)) << r << "," << j;
        }
      }
    }
  }
}

// The kernel at `isa` against the reference, bit for bit, for every type, shape, batch size in
// `batches` and a row range split at the first group boundary.
void expect_kernel_equals_reference(Isa isa, std::initializer_list<int64_t> batches, int64_t n_max,
                                    std::initializer_list<DType> types) {
  IsaScope scope(isa);
  SCOPED_TRACE(seed_trace());
  Rng rng(test_seed() + 2);
  for (DType t : types) {
    for (int64_t rows : {1, 16, 37}) {
      for (int64_t k : {32, 96, 256, 512, 768}) {
        if (!repack_fits(t, k)) continue;
        SCOPED_TRACE(std::string(dtype_name(t)) + " rows " + std::to_string(rows) + " k " +
                     std::to_string(k));
        const std::vector<uint8_t> w = random_weights(rng, t, rows, k, (rows + k) % 2 == 0);
        const std::vector<float> x = random_activations(rng, n_max, k);
        const std::vector<uint8_t> a = quantize_acts(t, x, n_max, k);
        std::vector<uint8_t> packed(static_cast<size_t>(repack_bytes(t, rows, k)));
        repack_weights(t, w.data(), rows, k, packed.data());
        const int64_t ldo = rows + 3;
        std::vector<float> want(static_cast<size_t>(n_max * ldo), -7.0f);
        ref::repack_gemm(t, w.data(), rows, k, a.data(), n_max, want.data(), ldo);
        for (int64_t n : batches) {
          for (int64_t split : {int64_t{0}, int64_t{16}}) {
            if (split > rows) continue;
            std::vector<float> got(static_cast<size_t>(n * ldo), -7.0f);
            repack_gemm(t, packed.data(), rows, k, 0, split, a.data(), n, got.data(), ldo);
            repack_gemm(t, packed.data(), rows, k, split, rows, a.data(), n, got.data(), ldo);
            for (int64_t j = 0; j < n; ++j) {
              for (int64_t r = 0; r < ldo; ++r) {
                const float expect = r < rows ? want[j * ldo + r] : -7.0f;  // padding untouched
                ASSERT_EQ(0, std::memcmp(&got[j * ldo + r], &expect, 4))
                    << "n " << n << " split " << split << " act " << j << " row " << r << ": "
                    << got[j * ldo + r] << " vs " << expect;
              }
            }
          }
        }
      }
    }
  }
}

TEST(Repack, VnniKernelEqualsReferenceBitwiseForAnyBatchAndRowRange) {
  if (detected_isa() < Isa::avx512_vnni) GTEST_SKIP() << "SKIPPED: no avx512_vnni on this CPU";
  expect_kernel_equals_reference(Isa::avx512_vnni, {1, 2, 7, 8, 9, 19}, 19,
                                 {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::IQ4_NL, DType::MXFP4,
                                  DType::Q4_K, DType::Q5_K, DType::Q6_K});
}

// At amx whole tiles of 16 activation rows run on AMX and the rest on VNNI: batches below, at and
// around multiples of 16, every result equal to the reference bit for bit.
TEST(Repack, AmxKernelEqualsReferenceBitwiseForAnyBatchAndRowRange) {
  if (detected_isa() < Isa::amx) GTEST_SKIP() << "SKIPPED: amx not available on this CPU (" << cpu_features().why << ")";
  expect_kernel_equals_reference(Isa::amx, {1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 20, 24, 31, 32, 33, 50}, 50,
                                 {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::IQ4_NL, DType::MXFP4,
                                  DType::Q4_K, DType::Q5_K, DType::Q6_K});
}

// The K-quants' AMX kernel (repack_amx_k.cpp) builds each group's folded tiles once per chunk of
// activation rows and runs the chunk's tiles in pairs: a long row (k = 12288, so a chunk is 32
// rows) and n = 80 gives chunks of 32, 32 and 16 rows, pairs and a single tile, plus 3 rows on
// VNNI; every result equal to the reference bit for bit, over a split row range.
TEST(Repack, AmxKQuantKernelAcrossActivationChunks) {
  if (detected_isa() < Isa::amx) GTEST_SKIP() << "SKIPPED: amx not available on this CPU (" << cpu_features().why << ")";
  IsaScope scope(Isa::amx);
  SCOPED_TRACE(seed_trace());
  Rng rng(test_seed() + 5);
  const int64_t rows = 37, k = 256 * 48, n = 83, ldo = rows;
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const std::vector<uint8_t> w = random_weights(rng, t, rows, k, false);
    const std::vector<float> x = random_activations(rng, n, k);
    const std::vector<uint8_t> a = quantize_acts(t, x, n, k);
    std::vector<uint8_t> packed(static_cast<size_t>(repack_bytes(t, rows, k)));
    repack_weights(t, w.data(), rows, k, packed.data());
    std::vector<float> want(static_cast<size_t>(n * ldo)), got(want.size(), -7.0f);
    ref::repack_gemm(t, w.data(), rows, k, a.data(), n, want.data(), ldo);
    repack_gemm(t, packed.data(), rows, k, 0, 16, a.data(), n, got.data(), ldo);
    repack_gemm(t, packed.data(), rows, k, 16, rows, a.data(), n, got.data(), ldo);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(0, std::memcmp(&got[i], &want[i], 4)) << i << ": " << got[i] << " vs " << want[i];
  }
}

// MXFP4's E8M0 scales at the ends of their range (the subnormal 2^-128 and 2^-127, the smallest
// normal, 2^127): the VNNI kernel's in-register conversion against the reference's ldexp.
TEST(Repack, VnniAndAmxMxfp4ScaleExponentsAtTheEnds) {
  if (detected_isa() < Isa::avx512_vnni) GTEST_SKIP() << "SKIPPED: no avx512_vnni on this CPU";
  SCOPED_TRACE(seed_trace());
  Rng rng(test_seed() + 4);
  const int64_t rows = 16, k = 32 * 6, n = 19;  // at amx: one tile of 16 on AMX, 3 rows on VNNI
  std::vector<uint8_t> w = random_weights(rng, DType::MXFP4, rows, k, false);
  const uint8_t exps[] = {0, 1, 2, 3, 127, 128, 200, 254, 255};
  for (int64_t b = 0; b < rows * k / 32; ++b) w[17 * b] = exps[b % 9];
  const std::vector<float> x = random_activations(rng, n, k);
  const std::vector<uint8_t> a = quantize_acts(DType::MXFP4, x, n, k);
  std::vector<uint8_t> packed(static_cast<size_t>(repack_bytes(DType::MXFP4, rows, k)));
  repack_weights(DType::MXFP4, w.data(), rows, k, packed.data());
  std::vector<float> want(static_cast<size_t>(n * rows));
  ref::repack_gemm(DType::MXFP4, w.data(), rows, k, a.data(), n, want.data(), rows);
  for (Isa isa : {Isa::avx512_vnni, Isa::amx}) {
    if (detected_isa() < isa) {
      std::printf("SKIPPED part: %s not on this CPU\n", std::string(isa_name(isa)).c_str());
      continue;
    }
    SCOPED_TRACE(std::string(isa_name(isa)));
    IsaScope scope(isa);
    std::vector<float> got(want.size());
    repack_gemm(DType::MXFP4, packed.data(), rows, k, 0, rows, a.data(), n, got.data(), rows);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(0, std::memcmp(&got[i], &want[i], 4)) << i << ": " << got[i] << " vs " << want[i];
  }
}

}  // namespace
}  // namespace cadenza::simd::testing
