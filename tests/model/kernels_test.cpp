// CPU backend ops against naive formulas (in double) on random data, through the Backend
// interface; plus batch- and thread-count invariance of the matmul.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/moe_routing.h"
#include "kernels/simd/isa.h"
#include "kernels/simd/kernels.h"
#include "kernels/simd/repack.h"
#include "tensor/quant.h"
#include "backend_test_util.h"

namespace cadenza::kernels {
namespace {

// The activation row as the CPU backend's matmul sees it for weights of `type` at the active ISA
// level: quantized to Q8_0 (repacked kernels, and Q8_0/Q4_0 weights) or Q8_K (Q4_K/Q6_K, and Q5_K
// where it is repacked) and decoded back, or unchanged (F16/BF16, types without a SIMD kernel, and
// the scalar level, which multiplies decoded weights with f32 activations).
std::vector<float> activation_as_used(DType type, const float* x, int64_t k) {
  std::vector<float> out(x, x + k);
  const simd::Isa isa = simd::active_isa();
  std::optional<DType> at;
  if (simd::repack_usable(type, isa) && simd::repack_fits(type, k)) {
    at = type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K ? DType::Q8_K : DType::Q8_0;
  } else if (isa != simd::Isa::scalar) {
    at = simd::activation_dtype(type);
  }
  if (!at || *at == DType::F32) return out;
  std::vector<uint8_t> q(static_cast<size_t>(*row_bytes(*at, k)));
  quantize_row(*at, x, q.data(), k);
  dequantize_row(*at, q.data(), out.data(), k);
  return out;
}

TEST(CpuKernels, MatmulMatchesNaiveForEveryWeightType) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 3});
  const int64_t k = 512, m = 37, n = 5;
  const std::vector<float> w = random_floats(static_cast<size_t>(m * k), 1);
  const std::vector<float> x = random_floats(static_cast<size_t>(n * k), 2);
  for (DType type : {DType::F32,    DType::F16,     DType::BF16,    DType::Q8_0,   DType::Q4_0,
                     DType::Q4_1,   DType::Q5_0,    DType::Q5_1,    DType::Q4_K,   DType::Q5_K,
                     DType::Q6_K,   DType::Q2_K,    DType::Q3_K,    DType::IQ4_XS, DType::IQ4_NL,
                     DType::MXFP4,  DType::IQ2_XXS, DType::IQ2_XS,  DType::IQ2_S,  DType::IQ3_XXS,
                     DType::IQ3_S,  DType::IQ1_S,   DType::IQ1_M}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    std::unique_ptr<Weight> weight = upload(*backend, type, w, k, m);
    const std::vector<float> stored = as_stored(type, w, k);
    HostBuffer xb(*backend, x);
    HostBuffer yb(*backend, std::vector<float>(static_cast<size_t>(n * m)));
    backend->matmul(*weight, xb.matrix(n, k), yb.matrix(n, m));
    const std::vector<float> y = yb.floats();
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<float> xa = activation_as_used(type, x.data() + t * k, k);
      for (int64_t j = 0; j < m; ++j) {
        double ref = 0, magnitude = 0;
        for (int64_t i = 0; i < k; ++i) {
          ref += static_cast<double>(stored[j * k + i]) * xa[i];
          magnitude += std::abs(static_cast<double>(stored[j * k + i]) * xa[i]);
        }
        EXPECT_NEAR(y[t * m + j], ref, 1e-6 * magnitude + 1e-6) << "row " << t << " col " << j;
      }
    }
  }
}

// matmul_experts with every weight type: each (token, slot) row against the naive dot product of
// the slot's expert, as the plain matmul test does; n = 1 (decode) and n = 7 (a batch).
TEST(CpuKernels, MatmulExpertsMatchesNaiveForEveryWeightType) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const int64_t k = 256, m = 40, n_experts = 4, k_used = 2;
  const std::vector<float> w = random_floats(static_cast<size_t>(n_experts * m * k), 21);
  for (DType type : {DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::Q2_K,
                     DType::Q3_K, DType::IQ4_XS, DType::IQ4_NL, DType::MXFP4, DType::IQ2_XXS,
                     DType::IQ3_S, DType::IQ1_S}) {
    for (int64_t n : {int64_t{1}, int64_t{7}}) {
      SCOPED_TRACE(std::string(dtype_name(type)) + " n " + std::to_string(n));
      std::unique_ptr<Weight> weight = upload(*backend, type, w, k, m, n_experts);
      const std::vector<float> stored = as_stored(type, w, k);
      const std::vector<float> x = random_floats(static_cast<size_t>(n * k), 22 + n);
      std::vector<int32_t> ids(static_cast<size_t>(n * k_used));
      for (int64_t t = 0; t < n; ++t) {
        ids[t * k_used] = static_cast<int32_t>((t + 1) % n_experts);
        ids[t * k_used + 1] = static_cast<int32_t>((t + 3) % n_experts);
      }
      HostBuffer xb(*backend, x), ids_b(*backend, ids);
      HostBuffer yb(*backend, std::vector<float>(static_cast<size_t>(n * k_used * m)));
      backend->matmul_experts(*weight, xb.matrix(n, k), ids_b.index(n, k_used), yb.matrix(n * k_used, m));
      const std::vector<float> y = yb.floats();
      for (int64_t t = 0; t < n; ++t) {
        const std::vector<float> xa = activation_as_used(type, x.data() + t * k, k);
        for (int64_t s = 0; s < k_used; ++s) {
          const int64_t e = ids[t * k_used + s];
          for (int64_t j = 0; j < m; ++j) {
            double ref = 0, magnitude = 0;
            for (int64_t i = 0; i < k; ++i) {
              const double p = static_cast<double>(stored[(e * m + j) * k + i]) * xa[i];
              ref += p;
              magnitude += std::abs(p);
            }
            ASSERT_NEAR(y[(t * k_used + s) * m + j], ref, 1e-6 * magnitude + 1e-6)
                << "token " << t << " slot " << s << " expert " << e << " row " << j;
          }
        }
      }
    }
  }
}

// The K-quants at n = 37: at amx two tiles of 16 rows on AMX (the folded-scale kernel) and 5 on
// VNNI, each row equal to the row alone (VNNI).
TEST(CpuKernels, MatmulIsBatchAndThreadInvariant) {
  struct Case {
    DType type;
    int64_t k, n;
  };
  for (const Case c : {Case{DType::F16, 96, 9}, Case{DType::Q8_0, 96, 9}, Case{DType::Q4_K, 512, 37},
                       Case{DType::Q5_K, 512, 37}, Case{DType::Q6_K, 512, 37}}) {
    SCOPED_TRACE(std::string(dtype_name(c.type)));
    const DType type = c.type;
    const int64_t k = c.k, m = 50, n = c.n;
    const std::vector<float> w = random_floats(static_cast<size_t>(m * k), 3);
    const std::vector<float> x = random_floats(static_cast<size_t>(n * k), 4);
    std::unique_ptr<Backend> one = make_cpu_backend({.n_threads = 1});
    std::unique_ptr<Backend> three = make_cpu_backend({.n_threads = 3});
    std::unique_ptr<Weight> w1 = upload(*one, type, w, k, m);
    std::unique_ptr<Weight> w3 = upload(*three, type, w, k, m);
    HostBuffer xb(*one, x);
    HostBuffer yb(*one, std::vector<float>(static_cast<size_t>(n * m)));
    one->matmul(*w1, xb.matrix(n, k), yb.matrix(n, m));
    const std::vector<float> batched = yb.floats();
    for (int64_t t = 0; t < n; ++t) {
      HostBuffer row(*three, std::vector<float>(x.begin() + t * k, x.begin() + (t + 1) * k));
      HostBuffer out(*three, std::vector<float>(static_cast<size_t>(m)));
      three->matmul(*w3, row.matrix(1, k), out.matrix(1, m));
      const std::vector<float> alone = out.floats();
      EXPECT_EQ(0, std::memcmp(alone.data(), batched.data() + t * m, m * sizeof(float))) << t;
    }
  }
}

// --no-repack (budget 0) and a budget smaller than a weight: no copy is made, the matmul still
// matches the copy-making backend to kernel rounding; the default budget makes one where the ISA
// level has a repacked kernel.
TEST(CpuKernels, RepackBudgetLimitsTheCopies) {
  const int64_t rows = 64, k = 256;
  const std::vector<float> w = random_floats(static_cast<size_t>(rows * k), 31);
  const std::vector<float> x = random_floats(static_cast<size_t>(4 * k), 32);
  std::vector<std::vector<float>> results;
  for (int64_t budget : {int64_t{0}, int64_t{100}, int64_t{-1}}) {
    SCOPED_TRACE(budget);
    std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2, .repack_budget_bytes = budget});
    std::unique_ptr<Weight> weight = upload(*backend, DType::Q4_K, w, k, rows);
    HostBuffer xb(*backend, x), yb(*backend, std::vector<float>(static_cast<size_t>(4 * rows)));
    const uint64_t before = cpu::repacked_bytes();
    backend->matmul(*weight, xb.matrix(4, k), yb.matrix(4, rows));
    const uint64_t made = cpu::repacked_bytes() - before;
    if (budget >= 0) {
      EXPECT_EQ(made, 0u);
    } else {
      EXPECT_EQ(made > 0, simd::repack_usable(DType::Q4_K, simd::active_isa()));
    }
    results.push_back(yb.floats());
  }
  for (size_t i = 0; i < results[0].size(); ++i) {
    EXPECT_NEAR(results[0][i], results[2][i], 1e-3 * (1 + std::abs(results[2][i])));
    EXPECT_EQ(results[0][i], results[1][i]);
  }
}

TEST(CpuKernels, GetRowsDecodesTheRequestedRows) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const int64_t d = 64, vocab = 10;
  const std::vector<float> table = random_floats(static_cast<size_t>(vocab * d), 5);
  std::unique_ptr<Weight> weight = upload(*backend, DType::Q8_0, table, d, vocab);
  const std::vector<float> stored = as_stored(DType::Q8_0, table, d);
  const std::vector<int32_t> ids = {3, 0, 9, 3};
  HostBuffer idb(*backend, ids);
  HostBuffer out(*backend, std::vector<float>(ids.size() * d));
  backend->get_rows(*weight, idb.index(4, 1), out.matrix(4, d));
  const std::vector<float> got = out.floats();
  for (size_t t = 0; t < ids.size(); ++t) {
    for (int64_t i = 0; i < d; ++i) EXPECT_EQ(got[t * d + i], stored[ids[t] * d + i]);
  }
}

TEST(CpuKernels, RmsNormMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const int64_t n = 7, d = 80;
  const float eps = 1e-6f;
  const std::vector<float> x = random_floats(static_cast<size_t>(n * d), 6, 3.0f);
  const std::vector<float> w = random_floats(static_cast<size_t>(d), 7);
  std::unique_ptr<Weight> weight = upload(*backend, DType::F32, w, d);
  HostBuffer xb(*backend, x);
  HostBuffer out(*backend, std::vector<float>(x.size()));
  backend->rms_norm(xb.matrix(n, d), *weight, eps, out.matrix(n, d));
  const std::vector<float> got = out.floats();
  for (int64_t t = 0; t < n; ++t) {
    double sum_sq = 0;
    for (int64_t i = 0; i < d; ++i) sum_sq += static_cast<double>(x[t * d + i]) * x[t * d + i];
    const double scale = 1.0 / std::sqrt(sum_sq / d + eps);
    for (int64_t i = 0; i < d; ++i) {
      const double ref = x[t * d + i] * scale * w[i];
      EXPECT_NEAR(got[t * d + i], ref, 1e-5 * std::abs(ref) + 1e-6);
    }
  }
}

TEST(CpuKernels, RopeMatchesNaiveInBothLayouts) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const int32_t heads = 3, head_dim = 16;
  const int64_t n = 5;
  const std::vector<int32_t> positions = {0, 1, 7, 300, 4095};
  const std::vector<float> x = random_floats(static_cast<size_t>(n * heads * head_dim), 8);
  const std::vector<float> factors = {1.0f, 1.5f, 2.0f, 4.0f, 8.0f, 8.0f};  // n_dims/2 = 6
  std::unique_ptr<Weight> factor_weight = upload(*backend, DType::F32, factors, 6);
  for (RopeLayout layout : {RopeLayout::Normal, RopeLayout::NeoX}) {
    for (bool with_factors : {false, true}) {
      RopeParams p;
      p.n_dims = 12;  // partial rotation: the last 4 elements of each head stay as they are
      p.freq_base = 10000.0f;
      p.freq_scale = 0.5f;
      p.layout = layout;
      p.freq_factors = with_factors ? factor_weight.get() : nullptr;
      HostBuffer xb(*backend, x);
      HostBuffer pos(*backend, positions);
      backend->rope(xb.matrix(n, heads * head_dim), heads, head_dim, pos.index(n, 1), p);
      const std::vector<float> got = xb.floats();
      for (int64_t t = 0; t < n; ++t) {
        for (int32_t h = 0; h < heads; ++h) {
          const float* in = x.data() + (t * heads + h) * head_dim;
          const float* out = got.data() + (t * heads + h) * head_dim;
          std::vector<double> ref(in, in + head_dim);
          for (int32_t i = 0; i < p.n_dims / 2; ++i) {
            double theta = positions[t] * 0.5 * std::pow(10000.0, -2.0 * i / p.n_dims);
            if (with_factors) theta /= factors[i];
            const int a = layout == RopeLayout::NeoX ? i : 2 * i;
            const int b = layout == RopeLayout::NeoX ? i + p.n_dims / 2 : 2 * i + 1;
            ref[a] = in[a] * std::cos(theta) - in[b] * std::sin(theta);
            ref[b] = in[a] * std::sin(theta) + in[b] * std::cos(theta);
          }
          for (int32_t i = 0; i < head_dim; ++i) EXPECT_NEAR(out[i], ref[i], 2e-5) << t << " " << h << " " << i;
        }
      }
    }
  }
}

// Two sequences with shuffled block tables, tokens interleaved in one batch, GQA, and a value
// head size different from the key head size.
TEST(CpuKernels, PagedAttentionMatchesNaiveSoftmax) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 3});
  const int32_t n_heads = 4, n_kv = 2, dk = 8, dv = 6, block_size = 4, num_blocks = 24;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
  // Sequence 0: positions 0..70 (more than one online-softmax chunk), sequence 1: 0..5; blocks
  // handed out in a shuffled order.
  const int32_t len0 = 71, len1 = 6;
  std::vector<int32_t> blocks(num_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(42));
  const int32_t blocks0 = (len0 + block_size - 1) / block_size, blocks1 = 2;
  const std::vector<std::vector<int32_t>> tables = {
      std::vector<int32_t>(blocks.begin(), blocks.begin() + blocks0),
      std::vector<int32_t>(blocks.begin() + blocks0, blocks.begin() + blocks0 + blocks1)};
  std::vector<int32_t> seq, pos;
  for (int32_t p = 0; p < len0; ++p) {
    seq.push_back(0);
    pos.push_back(p);
    if (p < len1) {
      seq.push_back(1);
      pos.push_back(p);
    }
  }
  const int64_t n = static_cast<int64_t>(seq.size());
  std::vector<int32_t> slots, table_matrix(2 * blocks0, 0);
  for (int64_t t = 0; t < n; ++t) {
    slots.push_back(tables[seq[t]][pos[t] / block_size] * block_size + pos[t] % block_size);
  }
  std::copy(tables[0].begin(), tables[0].end(), table_matrix.begin());
  std::copy(tables[1].begin(), tables[1].end(), table_matrix.begin() + blocks0);

  const std::vector<float> q = random_floats(static_cast<size_t>(n * n_heads * dk), 9);
  const std::vector<float> k = random_floats(static_cast<size_t>(n * n_kv * dk), 10);
  const std::vector<float> v = random_floats(static_cast<size_t>(n * n_kv * dv), 11);
  HostBuffer keys(*backend, std::vector<float>(static_cast<size_t>(num_blocks * block_size * n_kv * dk)));
  HostBuffer values(*backend, std::vector<float>(static_cast<size_t>(num_blocks * block_size * n_kv * dv)));
  KvLayer kv{keys.matrix(1, 1).data, values.matrix(1, 1).data, DType::F32, num_blocks, block_size,
             n_kv, dk, dv};
  HostBuffer qb(*backend, q), kb(*backend, k), vb(*backend, v);
  HostBuffer slot_b(*backend, slots), seq_b(*backend, seq), pos_b(*backend, pos),
      table_b(*backend, table_matrix);
  HostBuffer out(*backend, std::vector<float>(static_cast<size_t>(n * n_heads * dv)));
  backend->kv_write(kv, kb.matrix(n, n_kv * dk), vb.matrix(n, n_kv * dv), slot_b.index(n, 1));
  AttentionBatch batch{pos_b.index(n, 1), seq_b.index(n, 1), table_b.index(2, blocks0), {}};
  backend->attention(qb.matrix(n, n_heads * dk), kv, batch, n_heads, {.scale = scale},
                     out.matrix(n, n_heads * dv));
  const std::vector<float> got = out.floats();

  for (int64_t t = 0; t < n; ++t) {
    for (int32_t h = 0; h < n_heads; ++h) {
      const int32_t g = h / (n_heads / n_kv);
      // The keys of the same sequence at positions <= pos[t] (in this batch: all written).
      std::vector<int64_t> sources;
      for (int64_t u = 0; u < n; ++u) {
        if (seq[u] == seq[t] && pos[u] <= pos[t]) sources.push_back(u);
      }
      std::vector<double> scores;
      double max_score = -1e300;
      for (int64_t u : sources) {
        double s = 0;
        for (int32_t i = 0; i < dk; ++i) {
          s += static_cast<double>(q[(t * n_heads + h) * dk + i]) * k[(u * n_kv + g) * dk + i];
        }
        scores.push_back(s * scale);
        max_score = std::max(max_score, s * scale);
      }
      double total = 0;
      for (double& s : scores) total += (s = std::exp(s - max_score));
      for (int32_t i = 0; i < dv; ++i) {
        double ref = 0;
        for (size_t j = 0; j < sources.size(); ++j) {
          ref += scores[j] / total * v[(sources[j] * n_kv + g) * dv + i];
        }
        EXPECT_NEAR(got[(t * n_heads + h) * dv + i], ref, 1e-5) << "token " << t << " head " << h;
      }
    }
  }
}

// The routing rule shared by the CPU and CUDA backends (kernels/moe_routing.h): equal
// probabilities go to the lower expert id, at every rank; the CPU backend runs exactly it.
TEST(CpuKernels, RoutingTiesGoToTheLowerExpertId) {
  const int64_t n_experts = 6, k = 4;
  // Token 0: all equal. Token 1: experts 4 and 1 tie for first, 5 and 2 tie for third.
  const std::vector<float> logits = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f,
                                     -1.0f, 2.0f, 1.0f, 0.0f, 2.0f, 1.0f};
  const std::vector<std::vector<int32_t>> expected = {{0, 1, 2, 3}, {1, 4, 2, 5}};
  std::vector<float> scratch(static_cast<size_t>(kernels::route_scratch_floats(n_experts, 1)));
  for (size_t t = 0; t < expected.size(); ++t) {
    std::vector<int32_t> ids(k);
    std::vector<float> weights(k);
    kernels::route_token(logits.data() + t * n_experts, n_experts, k, kernels::RouteRule{},
                         scratch.data(), ids.data(), weights.data());
    EXPECT_EQ(ids, expected[t]) << "token " << t;
    EXPECT_EQ(weights[0], weights[1]);
  }
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  HostBuffer logits_b(*backend, logits);
  HostBuffer ids_b(*backend, std::vector<int32_t>(2 * k));
  HostBuffer weights_b(*backend, std::vector<float>(2 * k));
  backend->route_experts(logits_b.matrix(2, n_experts), RoutingParams{}, ids_b.index(2, k),
                         weights_b.matrix(2, k));
  const std::vector<int32_t> ids = ids_b.ints();
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + k), expected[0]);
  EXPECT_EQ(std::vector<int32_t>(ids.begin() + k, ids.end()), expected[1]);
}

TEST(CpuKernels, ExpertRoutingMatmulAndCombineMatchNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const int64_t n = 6, n_experts = 5, k_used = 2, d = 32, f = 24;
  std::vector<float> router = random_floats(static_cast<size_t>(n * n_experts), 12);
  router[0] = router[1] = 3.0f;  // a tie on token 0: expert 0 wins (lower id)
  const std::vector<float> w = random_floats(static_cast<size_t>(n_experts * f * d), 13);
  const std::vector<float> x = random_floats(static_cast<size_t>(n * d), 14);
  std::unique_ptr<Weight> weight = upload(*backend, DType::F16, w, d, f, n_experts);
  const std::vector<float> stored = as_stored(DType::F16, w, d);

  HostBuffer router_b(*backend, router);
  HostBuffer ids_b(*backend, std::vector<int32_t>(n * k_used));
  HostBuffer weights_b(*backend, std::vector<float>(n * k_used));
  HostBuffer xb(*backend, x);
  HostBuffer yb(*backend, std::vector<float>(n * k_used * f));
  RoutingParams routing;
  routing.normalize_top_k = true;
  routing.scale = 2.0f;
  backend->route_experts(router_b.matrix(n, n_experts), routing, ids_b.index(n, k_used),
                         weights_b.matrix(n, k_used));
  backend->matmul_experts(*weight, xb.matrix(n, d), ids_b.index(n, k_used), yb.matrix(n * k_used, f));
  const std::vector<int32_t> ids = ids_b.ints();
  const std::vector<float> weights = weights_b.floats();
  const std::vector<float> y = yb.floats();

  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> probs(n_experts);
    double max_logit = *std::max_element(router.begin() + t * n_experts, router.begin() + (t + 1) * n_experts);
    double total = 0;
    for (int64_t e = 0; e < n_experts; ++e) total += probs[e] = std::exp(router[t * n_experts + e] - max_logit);
    std::vector<int64_t> order(n_experts);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return probs[a] > probs[b]; });
    const double chosen = probs[order[0]] + probs[order[1]];
    for (int64_t s = 0; s < k_used; ++s) {
      EXPECT_EQ(ids[t * k_used + s], order[s]) << "token " << t;
      EXPECT_NEAR(weights[t * k_used + s], 2.0 * probs[order[s]] / chosen, 1e-6);
      for (int64_t j = 0; j < f; ++j) {
        double ref = 0;
        for (int64_t i = 0; i < d; ++i) ref += static_cast<double>(stored[(order[s] * f + j) * d + i]) * x[t * d + i];
        EXPECT_NEAR(y[(t * k_used + s) * f + j], ref, 1e-4);
      }
    }
  }
  EXPECT_EQ(ids[0], 0);

  // Weighted sum of the slot rows, in slot order.
  HostBuffer combined(*backend, std::vector<float>(n * f));
  backend->weighted_sum_slots(yb.matrix(n * k_used, f), weights_b.matrix(n, k_used), combined.matrix(n, f));
  const std::vector<float> sum = combined.floats();
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < f; ++j) {
      const double ref = static_cast<double>(weights[t * 2]) * y[(t * 2) * f + j] +
                         static_cast<double>(weights[t * 2 + 1]) * y[(t * 2 + 1) * f + j];
      EXPECT_NEAR(sum[t * f + j], ref, 1e-5);
    }
  }
}

TEST(CpuKernels, ElementwiseOps) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const int64_t n = 3, d = 10;
  const std::vector<float> a = random_floats(n * d, 15), b = random_floats(n * d, 16);
  const std::vector<float> bias = random_floats(d, 17);
  std::unique_ptr<Weight> bias_w = upload(*backend, DType::F32, bias, d);
  HostBuffer ab(*backend, a), bb(*backend, b);
  HostBuffer sum(*backend, std::vector<float>(n * d)), prod(*backend, std::vector<float>(n * d)),
      glu(*backend, std::vector<float>(n * d)), biased(*backend, std::vector<float>(n * d));
  backend->add(ab.matrix(n, d), bb.matrix(n, d), sum.matrix(n, d));
  backend->mul(ab.matrix(n, d), bb.matrix(n, d), prod.matrix(n, d));
  backend->swiglu(ab.matrix(n, d), bb.matrix(n, d), glu.matrix(n, d));
  backend->add_bias(ab.matrix(n, d), *bias_w, biased.matrix(n, d));
  const std::vector<float> s = sum.floats(), p = prod.floats(), g = glu.floats(), bi = biased.floats();
  for (int64_t i = 0; i < n * d; ++i) {
    EXPECT_EQ(s[i], a[i] + b[i]);
    EXPECT_EQ(p[i], a[i] * b[i]);
    EXPECT_NEAR(g[i], a[i] / (1.0 + std::exp(-static_cast<double>(a[i]))) * b[i], 1e-6);
    EXPECT_EQ(bi[i], a[i] + bias[i % d]);
  }
  // gather_rows
  HostBuffer rows(*backend, std::vector<int32_t>{2, 0});
  HostBuffer gathered(*backend, std::vector<float>(2 * d));
  backend->gather_rows(ab.matrix(n, d), rows.index(2, 1), gathered.matrix(2, d));
  const std::vector<float> gr = gathered.floats();
  for (int64_t i = 0; i < d; ++i) {
    EXPECT_EQ(gr[i], a[2 * d + i]);
    EXPECT_EQ(gr[d + i], a[i]);
  }
}

TEST(CpuKernels, UploadRejectsUnsupportedTypesAndBadShapes) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 1});
  std::vector<uint8_t> bytes(1024);
  WeightDesc desc;
  desc.name = "blk.0.attn_q.weight";
  desc.type = DType::TQ1_0;  // sized, not decodable
  desc.cols = 256;
  desc.data = bytes.data();
  Result<std::unique_ptr<Weight>> w = backend->upload_weight(desc);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().find("blk.0.attn_q.weight"), std::string::npos) << w.error();
  desc.type = DType::Q8_0;
  desc.cols = 33;  // not a multiple of the block size
  w = backend->upload_weight(desc);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().find("blk.0.attn_q.weight"), std::string::npos) << w.error();
}

}  // namespace
}  // namespace cadenza::kernels
