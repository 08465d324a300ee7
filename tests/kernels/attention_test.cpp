// simd::attend and simd::swiglu (kernels/simd/attention.h) against double-precision formulas on
// random data, and attend's per-head invariance (a head's output does not depend on how many
// heads share the call), at the levels that have them (avx512 and above).
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/simd/attention.h"
#include "simd_test_util.h"

namespace cadenza::simd::testing {
namespace {

class AttendTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (GetParam() > detected_isa())
      GTEST_SKIP() << "SKIPPED: " << isa_name(GetParam()) << " not available on this CPU";
  }
};

// out = softmax(scale * q . K) V in double.
std::vector<double> naive_attention(const float* q, const std::vector<const float*>& k,
                                    const std::vector<const float*>& v, int dk, int dv,
                                    float scale) {
  std::vector<double> s(k.size());
  double mx = -INFINITY;
  for (size_t p = 0; p < k.size(); ++p) {
    double d = 0;
    for (int i = 0; i < dk; ++i) d += static_cast<double>(q[i]) * k[p][i];
    s[p] = d * scale;
    mx = std::max(mx, s[p]);
  }
  double total = 0;
  for (double& x : s) total += x = std::exp(x - mx);
  std::vector<double> out(static_cast<size_t>(dv), 0.0);
  for (size_t p = 0; p < k.size(); ++p)
    for (int i = 0; i < dv; ++i) out[static_cast<size_t>(i)] += s[p] / total * v[p][i];
  return out;
}

TEST_P(AttendTest, MatchesDoubleFormulaAndIsPerHeadInvariant) {
  IsaScope scope(GetParam());
  SCOPED_TRACE(seed_trace());
  if (!attend_available(64, 64)) GTEST_SKIP() << "SKIPPED: no vector attention at this level";
  Rng rng(test_seed() + 11);
  for (int dk : {16, 64, 128}) {
    const int dv = dk == 16 ? 32 : dk;
    for (int nq : {1, 7, 16}) {
      for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{33}, int64_t{100}}) {
        SCOPED_TRACE("dk " + std::to_string(dk) + " nq " + std::to_string(nq) + " n " + std::to_string(n));
        std::vector<float> qs(static_cast<size_t>(nq * dk)), ks(static_cast<size_t>(n * dk)),
            vs(static_cast<size_t>(n * dv));
        for (auto& x : qs) x = normal(rng, 1.0f);
        for (auto& x : ks) x = normal(rng, 1.0f);
        for (auto& x : vs) x = normal(rng, 1.0f);
        // Rows in reverse order in memory: attend must follow the pointers.
        std::vector<const float*> k(static_cast<size_t>(n)), v(static_cast<size_t>(n));
        for (int64_t p = 0; p < n; ++p) {
          k[static_cast<size_t>(p)] = ks.data() + (n - 1 - p) * dk;
          v[static_cast<size_t>(p)] = vs.data() + (n - 1 - p) * dv;
        }
        std::vector<const float*> q(static_cast<size_t>(nq));
        std::vector<float> out(static_cast<size_t>(nq * dv)), single(static_cast<size_t>(dv));
        std::vector<float*> o(static_cast<size_t>(nq));
        for (int h = 0; h < nq; ++h) {
          q[static_cast<size_t>(h)] = qs.data() + h * dk;
          o[static_cast<size_t>(h)] = out.data() + h * dv;
        }
        std::vector<float> scratch(static_cast<size_t>(attend_scratch_floats(nq, dv)));
        const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
        attend(q.data(), nq, k.data(), v.data(), n, dk, dv, scale, o.data(), scratch.data());
        for (int h = 0; h < nq; ++h) {
          const std::vector<double> want = naive_attention(q[static_cast<size_t>(h)], k, v, dk, dv, scale);
          for (int i = 0; i < dv; ++i) EXPECT_NEAR(out[static_cast<size_t>(h * dv + i)], want[static_cast<size_t>(i)], 2e-5) << h << "," << i;
          float* so = single.data();
          attend(&q[static_cast<size_t>(h)], 1, k.data(), v.data(), n, dk, dv, scale, &so, scratch.data());
          EXPECT_EQ(0, std::memcmp(so, out.data() + h * dv, static_cast<size_t>(dv) * sizeof(float))) << "head " << h;
        }
      }
    }
  }
}

TEST_P(AttendTest, SwigluMatchesDoubleFormula) {
  IsaScope scope(GetParam());
  SCOPED_TRACE(seed_trace());
  if (!attend_available(16, 16)) GTEST_SKIP() << "SKIPPED: no vector SwiGLU at this level";
  Rng rng(test_seed() + 12);
  for (int64_t n : {1, 15, 16, 17, 100}) {
    std::vector<float> g(static_cast<size_t>(n)), u(static_cast<size_t>(n)), o(static_cast<size_t>(n));
    for (auto& x : g) x = normal(rng, 4.0f);
    for (auto& x : u) x = normal(rng, 1.0f);
    g[0] = -120.0f;  // exp overflow territory: silu -> -0
    swiglu(g.data(), u.data(), o.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
      EXPECT_NEAR(o[i], want, 1e-6 * (1.0 + std::abs(want))) << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, AttendTest, ::testing::ValuesIn(all_levels()), level_name);

}  // namespace
}  // namespace cadenza::simd::testing
