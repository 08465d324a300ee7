// simd::delta_rule_step, simd::ssm_scan_step and simd::short_conv_step (kernels/simd/recurrent.h)
// on random data:
//  - the scalar references against the formulas in double precision over a run of tokens (the
//    state carried from step to step), including value dims that are not multiples of the
//    vector width or of the 64-column block;
//  - the dispatched path at every ISA level bit for bit equal to the scalar reference (same
//    operation order), outputs and final state.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/simd/recurrent.h"
#include "simd_test_util.h"

namespace cadenza::simd::testing {
namespace {

class RecurrentTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (GetParam() > detected_isa())
      GTEST_SKIP() << "SKIPPED: " << isa_name(GetParam()) << " not available on this CPU";
  }
};

std::vector<float> normals(Rng& rng, size_t n, float sigma = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng, sigma);
  return v;
}

struct DeltaCase {
  int64_t dk, dv, steps;
};

// S = decay S; d = beta (v - S^T k); S += k d^T; out = S^T q, in double.
void delta_rule_double(std::vector<double>& S, const float* q, const float* k, const float* v,
                       double decay, double beta, int64_t dk, int64_t dv, double* out) {
  for (double& s : S) s *= decay;
  std::vector<double> d(static_cast<size_t>(dv), 0.0);
  for (int64_t j = 0; j < dv; ++j) {
    double kv = 0;
    for (int64_t i = 0; i < dk; ++i) kv += S[static_cast<size_t>(i * dv + j)] * k[i];
    d[static_cast<size_t>(j)] = beta * (v[j] - kv);
  }
  for (int64_t i = 0; i < dk; ++i)
    for (int64_t j = 0; j < dv; ++j) S[static_cast<size_t>(i * dv + j)] += k[i] * d[static_cast<size_t>(j)];
  for (int64_t j = 0; j < dv; ++j) {
    double o = 0;
    for (int64_t i = 0; i < dk; ++i) o += S[static_cast<size_t>(i * dv + j)] * q[i];
    out[j] = o;
  }
}

TEST_P(RecurrentTest, DeltaRuleMatchesFormulaAndReference) {
  SCOPED_TRACE(seed_trace());
  IsaScope scope(GetParam());
  Rng rng(test_seed());
  for (const DeltaCase& c : {DeltaCase{16, 16, 9}, DeltaCase{32, 72, 7}, DeltaCase{8, 13, 5},
                             DeltaCase{128, 128, 4}}) {
    SCOPED_TRACE(::testing::Message() << "dk " << c.dk << " dv " << c.dv);
    const size_t state_size = static_cast<size_t>(c.dk * c.dv);
    std::vector<float> s_ref = normals(rng, state_size, 0.1f), s_vec = s_ref;
    std::vector<double> s_dbl(s_ref.begin(), s_ref.end());
    for (int64_t t = 0; t < c.steps; ++t) {
      // Unit-norm k (as the model feeds it), q scaled by 1/sqrt(dk).
      std::vector<float> q = normals(rng, static_cast<size_t>(c.dk)), k = q, v;
      k = normals(rng, static_cast<size_t>(c.dk));
      v = normals(rng, static_cast<size_t>(c.dv));
      double nq = 0, nk = 0;
      for (int64_t i = 0; i < c.dk; ++i) nq += q[i] * q[i], nk += k[i] * k[i];
      for (int64_t i = 0; i < c.dk; ++i) {
        q[i] = static_cast<float>(q[i] / std::sqrt(nq) / std::sqrt(c.dk));
        k[i] = static_cast<float>(k[i] / std::sqrt(nk));
      }
      const float decay = uniform(rng, 0.5f, 1.0f), beta = uniform(rng, 0.0f, 1.0f);
      std::vector<float> o_ref(static_cast<size_t>(c.dv)), o_vec(static_cast<size_t>(c.dv));
      std::vector<double> o_dbl(static_cast<size_t>(c.dv));
      delta_rule_step_ref(s_ref.data(), q.data(), k.data(), v.data(), decay, beta, c.dk, c.dv,
                          o_ref.data());
      delta_rule_step(s_vec.data(), q.data(), k.data(), v.data(), decay, beta, c.dk, c.dv,
                      o_vec.data());
      delta_rule_double(s_dbl, q.data(), k.data(), v.data(), decay, beta, c.dk, c.dv,
                        o_dbl.data());
      for (int64_t j = 0; j < c.dv; ++j) {
        ASSERT_EQ(o_ref[static_cast<size_t>(j)], o_vec[static_cast<size_t>(j)]) << "t " << t << " j " << j;
        ASSERT_NEAR(o_ref[static_cast<size_t>(j)], o_dbl[static_cast<size_t>(j)], 1e-4) << "t " << t << " j " << j;
      }
    }
    ASSERT_EQ(s_ref, s_vec);
    for (size_t i = 0; i < state_size; ++i) ASSERT_NEAR(s_ref[i], s_dbl[i], 1e-4) << i;
  }
}

struct ScanCase {
  int64_t n, p, steps;
};

TEST_P(RecurrentTest, SsmScanMatchesFormulaAndReference) {
  SCOPED_TRACE(seed_trace());
  IsaScope scope(GetParam());
  Rng rng(test_seed());
  for (const ScanCase& c : {ScanCase{16, 32, 9}, ScanCase{128, 64, 4}, ScanCase{8, 13, 5},
                            ScanCase{16, 100, 6}}) {
    SCOPED_TRACE(::testing::Message() << "n " << c.n << " p " << c.p);
    const size_t state_size = static_cast<size_t>(c.n * c.p);
    std::vector<float> s_ref = normals(rng, state_size, 0.1f), s_vec = s_ref;
    std::vector<double> s_dbl(s_ref.begin(), s_ref.end());
    for (int64_t t = 0; t < c.steps; ++t) {
      const std::vector<float> x = normals(rng, static_cast<size_t>(c.p));
      const std::vector<float> B = normals(rng, static_cast<size_t>(c.n));
      const std::vector<float> C = normals(rng, static_cast<size_t>(c.n));
      const float decay = uniform(rng, 0.5f, 1.0f), dt = uniform(rng, 0.0f, 2.0f);
      std::vector<float> o_ref(static_cast<size_t>(c.p)), o_vec(static_cast<size_t>(c.p));
      ssm_scan_step_ref(s_ref.data(), x.data(), B.data(), C.data(), decay, dt, c.n, c.p,
                        o_ref.data());
      ssm_scan_step(s_vec.data(), x.data(), B.data(), C.data(), decay, dt, c.n, c.p,
                    o_vec.data());
      // S = decay S + B (dt x)^T; out = S^T C, in double.
      for (int64_t i = 0; i < c.n; ++i)
        for (int64_t j = 0; j < c.p; ++j) {
          double& s = s_dbl[static_cast<size_t>(i * c.p + j)];
          s = s * decay + static_cast<double>(B[static_cast<size_t>(i)]) * dt * x[static_cast<size_t>(j)];
        }
      for (int64_t j = 0; j < c.p; ++j) {
        double o = 0;
        for (int64_t i = 0; i < c.n; ++i)
          o += s_dbl[static_cast<size_t>(i * c.p + j)] * C[static_cast<size_t>(i)];
        ASSERT_EQ(o_ref[static_cast<size_t>(j)], o_vec[static_cast<size_t>(j)]) << "t " << t << " j " << j;
        ASSERT_NEAR(o_ref[static_cast<size_t>(j)], o, 1e-4 * (1 + std::abs(o))) << "t " << t << " j " << j;
      }
    }
    ASSERT_EQ(s_ref, s_vec);
    for (size_t i = 0; i < state_size; ++i) ASSERT_NEAR(s_ref[i], s_dbl[i], 1e-4) << i;
  }
}

TEST_P(RecurrentTest, ShortConvMatchesFormulaAndReference) {
  SCOPED_TRACE(seed_trace());
  IsaScope scope(GetParam());
  Rng rng(test_seed());
  for (int64_t K : {4, 2, 1, 3}) {
    for (int64_t C : {64, 21, 8}) {
     for (bool with_bias : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "K " << K << " C " << C << " bias " << with_bias);
      const std::vector<float> bias = normals(rng, static_cast<size_t>(C), 0.5f);
      const float* b = with_bias ? bias.data() : nullptr;
      const std::vector<float> w = normals(rng, static_cast<size_t>(K * C), 0.5f);
      std::vector<float> st_ref = normals(rng, static_cast<size_t>((K - 1) * C)), st_vec = st_ref;
      std::vector<std::vector<float>> hist;
      for (int64_t t = 0; t < K - 1; ++t)
        hist.emplace_back(st_ref.begin() + t * C, st_ref.begin() + (t + 1) * C);
      for (int step = 0; step < 6; ++step) {
        const std::vector<float> x = normals(rng, static_cast<size_t>(C));
        hist.push_back(x);
        std::vector<float> o_ref(static_cast<size_t>(C)), o_vec(static_cast<size_t>(C));
        short_conv_step_ref(st_ref.data(), x.data(), w.data(), b, K, C, o_ref.data());
        short_conv_step(st_vec.data(), x.data(), w.data(), b, K, C, o_vec.data());
        ASSERT_EQ(o_ref, o_vec) << "step " << step;
        ASSERT_EQ(st_ref, st_vec) << "step " << step;
        for (int64_t c = 0; c < C; ++c) {
          double s = with_bias ? bias[static_cast<size_t>(c)] : 0.0;
          for (int64_t k = 0; k < K; ++k)
            s += static_cast<double>(w[static_cast<size_t>(c * K + k)]) *
                 hist[hist.size() - static_cast<size_t>(K) + static_cast<size_t>(k)][static_cast<size_t>(c)];
          ASSERT_NEAR(o_ref[static_cast<size_t>(c)], s / (1 + std::exp(-s)), 1e-5) << c;
        }
      }
     }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, RecurrentTest, ::testing::ValuesIn(all_levels()), level_name);

}  // namespace
}  // namespace cadenza::simd::testing
