// Activation quantizers at every ISA level against tensor/quant.h quantize_row: bit-identical
// output is required (the same float operations in the same order; rounding modes emulated).
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/simd/kernels.h"
#include "simd_test_util.h"

namespace cadenza::simd::testing {
namespace {

class QuantizeTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (GetParam() > detected_isa())
      GTEST_SKIP() << "SKIPPED: " << isa_name(GetParam()) << " not available on this CPU ("
                   << cpu_features().why << ")";
  }
};

// Rows of floats that exercise the edge cases on top of random data: exact .5 ties after scaling,
// an all-zero block, +max/-max ties for the signed maximum, tiny blocks (fp16 subnormal d) and
// huge ones (fp16 d overflowing to infinity for Q8_0).
std::vector<float> edge_rows(Rng& rng, int64_t block, int64_t nblocks) {
  std::vector<float> x(static_cast<size_t>(block * nblocks));
  for (int64_t b = 0; b < nblocks; ++b) {
    float* xb = &x[b * block];
    const int kind = static_cast<int>(b % 6);
    for (int64_t i = 0; i < block; ++i) {
      switch (kind) {
        case 0:  // amax 127 -> d = 1: values k + 0.5 are exact ties
          xb[i] = static_cast<float>(static_cast<int>(rng() % 254) - 127) + 0.5f;
          break;
        case 1: xb[i] = 0.0f; break;
        case 2: xb[i] = normal(rng); break;
        case 3: xb[i] = normal(rng, 1e-6f); break;
        case 4: xb[i] = normal(rng, 1e7f); break;
        default: xb[i] = normal(rng, 30.0f); break;
      }
    }
    if (kind == 0) xb[block - 1] = 127.0f;
    if (kind == 2) {  // the same magnitude with both signs; the first one sets the sign of d
      xb[3] = -9.0f;
      xb[block / 2] = 9.0f;
    }
    if (kind == 5) xb[0] = 200.0f, xb[1] = -200.0f;
  }
  return x;
}

void expect_same_bytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                       int64_t block_bytes) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      ADD_FAILURE() << "first difference at byte " << i << " (block " << i / block_bytes
                    << ", byte " << i % block_bytes << "): got " << int(got[i]) << " want "
                    << int(want[i]);
      return;
    }
}

TEST_P(QuantizeTest, Q8_0MatchesTensorQuantizer) {
  SCOPED_TRACE(seed_trace());
  IsaScope scope(GetParam());
  ASSERT_EQ(scope.got(), GetParam());
  Rng rng(test_seed());
  for (int64_t k : {32, 64, 96, 256, 4096}) {
    SCOPED_TRACE("k=" + std::to_string(k));
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<float> x = pass == 0 ? random_activations(rng, 1, k) : edge_rows(rng, 32, k / 32);
      std::vector<uint8_t> got(static_cast<size_t>(k / 32 * 34)), want(got.size());
      quantize_q8_0(x.data(), k, got.data());
      quantize_row(DType::Q8_0, x.data(), want.data(), k);
      expect_same_bytes(got, want, 34);
    }
  }
}

TEST_P(QuantizeTest, Q8_KMatchesTensorQuantizer) {
  SCOPED_TRACE(seed_trace());
  IsaScope scope(GetParam());
  Rng rng(test_seed() + 1);
  for (int64_t k : {256, 512, 4096}) {
    SCOPED_TRACE("k=" + std::to_string(k));
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<float> x =
          pass == 0 ? random_activations(rng, 1, k) : edge_rows(rng, 256, k / 256 + 5);
      const int64_t kk = static_cast<int64_t>(x.size());
      std::vector<uint8_t> got(static_cast<size_t>(kk / 256 * 292)), want(got.size());
      quantize_q8_k(x.data(), kk, got.data());
      quantize_row(DType::Q8_K, x.data(), want.data(), kk);
      expect_same_bytes(got, want, 292);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, QuantizeTest, ::testing::ValuesIn(all_levels()), level_name);

}  // namespace
}  // namespace cadenza::simd::testing
