// The backend ops that the giant MoE families added, against naive formulas (in double) on
// random data: routing with sigmoid gating, a selection bias and expert groups; YaRN RoPE and a
// rotation of a later part of each head (MLA's RoPE part); the strided copy; attention over the
// compressed latent cache (values inside the key rows).
#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "backend_test_util.h"
#include "kernels/cpu/cpu_backend.h"

namespace cadenza::kernels {
namespace {

// DeepSeek-V3's rule written out plainly: sigmoid scores, biased choice, groups ranked by the sum
// of their two best choices, the top-k of the kept groups, unbiased weights normalised and scaled.
void naive_route(const float* logits, int64_t e, int64_t k, const float* bias, int64_t groups,
                 int64_t groups_used, bool sigmoid, bool normalize, double scale,
                 std::vector<int32_t>& ids, std::vector<double>& weights) {
  std::vector<double> score(e), choice(e);
  double max_logit = *std::max_element(logits, logits + e), total = 0;
  for (int64_t i = 0; i < e; ++i) {
    score[i] = sigmoid ? 1.0 / (1.0 + std::exp(-static_cast<double>(logits[i])))
                       : std::exp(static_cast<double>(logits[i]) - max_logit);
    total += score[i];
  }
  for (int64_t i = 0; i < e; ++i) {
    if (!sigmoid) score[i] /= total;
    choice[i] = score[i] + (bias ? bias[i] : 0.0);
  }
  const int64_t per = e / groups;
  std::vector<std::pair<double, int64_t>> ranked_groups;
  for (int64_t g = 0; g < groups; ++g) {
    std::vector<double> v(choice.begin() + g * per, choice.begin() + (g + 1) * per);
    std::sort(v.rbegin(), v.rend());
    ranked_groups.push_back({-(v[0] + (per > 1 ? v[1] : 0.0)), g});
  }
  std::sort(ranked_groups.begin(), ranked_groups.end());
  std::vector<std::pair<double, int64_t>> candidates;
  for (int64_t r = 0; r < groups_used; ++r) {
    const int64_t g = ranked_groups[r].second;
    for (int64_t i = g * per; i < (g + 1) * per; ++i) candidates.push_back({-choice[i], i});
  }
  std::sort(candidates.begin(), candidates.end());
  ids.clear();
  weights.clear();
  double sum = 0;
  for (int64_t s = 0; s < k; ++s) {
    ids.push_back(static_cast<int32_t>(candidates[s].second));
    weights.push_back(score[candidates[s].second]);
    sum += weights.back();
  }
  for (double& w : weights) w = (normalize ? w / sum : w) * scale;
}

TEST(LatentKernels, SigmoidRoutingWithBiasAndGroupsMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const int64_t n = 40, e = 16, k = 4;
  const std::vector<float> logits = random_floats(static_cast<size_t>(n * e), 21, 2.0f);
  const std::vector<float> bias = random_floats(static_cast<size_t>(e), 22, 0.1f);
  std::unique_ptr<Weight> bias_weight = upload(*backend, DType::F32, bias, e);
  struct Case { bool sigmoid, with_bias, normalize; int32_t groups, used; float scale; };
  for (const Case& c : {Case{true, true, true, 4, 2, 2.5f}, Case{true, false, false, 8, 3, 1.0f},
                        Case{false, false, true, 1, 1, 1.0f}, Case{false, true, false, 2, 1, 1.5f}}) {
    SCOPED_TRACE(::testing::Message() << "sigmoid " << c.sigmoid << " bias " << c.with_bias
                                      << " groups " << c.groups << "/" << c.used);
    RoutingParams p;
    p.gating = c.sigmoid ? ExpertGating::Sigmoid : ExpertGating::Softmax;
    p.normalize_top_k = c.normalize;
    p.scale = c.scale;
    p.selection_bias = c.with_bias ? bias_weight.get() : nullptr;
    p.n_groups = c.groups;
    p.n_groups_used = c.used;
    HostBuffer lb(*backend, logits);
    HostBuffer ids_b(*backend, std::vector<int32_t>(static_cast<size_t>(n * k)));
    HostBuffer w_b(*backend, std::vector<float>(static_cast<size_t>(n * k)));
    backend->route_experts(lb.matrix(n, e), p, ids_b.index(n, k), w_b.matrix(n, k));
    const std::vector<int32_t> ids = ids_b.ints();
    const std::vector<float> weights = w_b.floats();
    for (int64_t t = 0; t < n; ++t) {
      std::vector<int32_t> ref_ids;
      std::vector<double> ref_w;
      naive_route(logits.data() + t * e, e, k, c.with_bias ? bias.data() : nullptr, c.groups,
                  c.used, c.sigmoid, c.normalize, c.scale, ref_ids, ref_w);
      EXPECT_EQ(std::vector<int32_t>(ids.begin() + t * k, ids.begin() + (t + 1) * k), ref_ids)
          << "token " << t;
      for (int64_t s = 0; s < k; ++s) EXPECT_NEAR(weights[t * k + s], ref_w[s], 1e-5);
    }
  }
}

// YaRN: the blend of interpolated and extrapolated frequencies over the correction range, times
// attn_factor; and a view that starts inside each head (heads head_dim apart, n_dims rotated).
TEST(LatentKernels, YarnRopeAndOffsetHeadsMatchNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const int32_t heads = 3, head_dim = 24, offset = 8, n_dims = 16;
  const int64_t n = 4;
  const std::vector<int32_t> positions = {0, 5, 700, 9000};
  const std::vector<float> x = random_floats(static_cast<size_t>(n * heads * head_dim), 23);
  RopeParams p;
  p.n_dims = n_dims;
  p.freq_base = 10000.0f;
  p.freq_scale = 1.0f / 40.0f;
  p.layout = RopeLayout::Normal;
  p.ext_factor = 1.0f;
  p.beta_fast = 32.0f;
  p.beta_slow = 1.0f;
  p.orig_ctx = 4096;
  p.attn_factor = 1.3f;
  HostBuffer xb(*backend, x);
  HostBuffer pos(*backend, positions);
  const Matrix all = xb.matrix(n, heads * head_dim);
  const Matrix view{all.data + offset, n, (heads - 1) * head_dim + n_dims, all.stride};
  backend->rope(view, heads, head_dim, pos.index(n, 1), p);
  const std::vector<float> got = xb.floats();
  // The correction range: pairs that turn beta times in orig_ctx positions.
  auto pair_of = [&](double beta) {
    return n_dims * std::log(4096.0 / (beta * 2 * std::numbers::pi)) / (2 * std::log(10000.0));
  };
  const double low = std::max(0.0, std::floor(pair_of(32.0)));
  const double high = std::min<double>(n_dims - 1, std::ceil(pair_of(1.0)));
  for (int64_t t = 0; t < n; ++t) {
    for (int32_t h = 0; h < heads; ++h) {
      const float* in = x.data() + (t * heads + h) * head_dim;
      const float* out = got.data() + (t * heads + h) * head_dim;
      std::vector<double> ref(in, in + head_dim);
      for (int32_t i = 0; i < n_dims / 2; ++i) {
        const double extrapolated = std::pow(10000.0, -2.0 * i / n_dims);
        const double ramp = std::clamp((i - low) / std::max(high - low, 0.001), 0.0, 1.0);
        const double inv = extrapolated / 40.0 * ramp + extrapolated * (1.0 - ramp);
        const double theta = positions[t] * inv;
        const int a = offset + 2 * i, b = offset + 2 * i + 1;
        ref[a] = 1.3 * (in[a] * std::cos(theta) - in[b] * std::sin(theta));
        ref[b] = 1.3 * (in[a] * std::sin(theta) + in[b] * std::cos(theta));
      }
      for (int32_t i = 0; i < head_dim; ++i) {
        EXPECT_NEAR(out[i], ref[i], 3e-5) << "token " << t << " head " << h << " element " << i;
      }
    }
  }
}

TEST(LatentKernels, CopyMatrixCopiesColumnBlocks) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const std::vector<float> src = random_floats(6 * 10, 24);
  HostBuffer sb(*backend, src), db(*backend, std::vector<float>(6 * 7, -1.0f));
  const Matrix s = sb.matrix(6, 10), d = db.matrix(6, 7);
  backend->copy_matrix({s.data + 3, 6, 4, s.stride}, {d.data + 2, 6, 4, d.stride});
  const std::vector<float> got = db.floats();
  for (int r = 0; r < 6; ++r) {
    for (int c = 0; c < 7; ++c) {
      const float expected = c >= 2 && c < 6 ? src[r * 10 + 3 + c - 2] : -1.0f;
      EXPECT_EQ(got[r * 7 + c], expected) << r << " " << c;
    }
  }
}

// The compressed cache: one KV head whose key row is (latent | rope part); the value of a
// position is the first dv elements of its key row. GQA with all query heads on that head.
TEST(LatentKernels, AttentionOverTheLatentCacheMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  ASSERT_TRUE(backend->supports_latent_kv(64, 32));
  const int32_t n_heads = 4, dk = 64, dv = 32, block_size = 4, num_blocks = 12;
  const float scale = 0.3f;
  const int64_t n = 37;  // one sequence, positions 0..36 (more than one attention chunk)
  std::vector<int32_t> positions(n), seq(n, 0), slots(n), table(num_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::reverse(table.begin(), table.end());
  for (int64_t t = 0; t < n; ++t) {
    positions[t] = static_cast<int32_t>(t);
    slots[t] = table[t / block_size] * block_size + static_cast<int32_t>(t % block_size);
  }
  const std::vector<float> q = random_floats(static_cast<size_t>(n * n_heads * dk), 25);
  const std::vector<float> k = random_floats(static_cast<size_t>(n * dk), 26);
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    SCOPED_TRACE(dtype_name(type));
    const size_t cache_bytes = static_cast<size_t>(*row_bytes(type, dk)) * num_blocks * block_size;
    HostBuffer keys(*backend, std::vector<float>(cache_bytes / sizeof(float) + 1));
    KvLayer kv{keys.matrix(1, 1).data, nullptr, type, num_blocks, block_size, 1, dk, dv, true};
    HostBuffer qb(*backend, q), kb(*backend, k), slot_b(*backend, slots), pos_b(*backend, positions),
        seq_b(*backend, seq), table_b(*backend, table);
    HostBuffer out(*backend, std::vector<float>(static_cast<size_t>(n * n_heads * dv)));
    backend->kv_write(kv, kb.matrix(n, dk), Matrix{}, slot_b.index(n, 1));
    const AttentionBatch batch{pos_b.index(n, 1), seq_b.index(n, 1), table_b.index(1, num_blocks), {}};
    backend->attention(qb.matrix(n, n_heads * dk), kv, batch, n_heads, {.scale = scale},
                       out.matrix(n, n_heads * dv));
    const std::vector<float> got = out.floats();
    const std::vector<float> stored = as_stored(type, k, dk);  // what the cache holds
    for (int64_t t = 0; t < n; ++t) {
      for (int32_t h = 0; h < n_heads; ++h) {
        std::vector<double> w(static_cast<size_t>(t + 1));
        double max_s = -1e300, total = 0;
        for (int64_t p = 0; p <= t; ++p) {
          double s = 0;
          for (int32_t i = 0; i < dk; ++i) s += double(q[(t * n_heads + h) * dk + i]) * stored[p * dk + i];
          w[p] = s * scale;
          max_s = std::max(max_s, w[p]);
        }
        for (double& x : w) total += (x = std::exp(x - max_s));
        for (int32_t i = 0; i < dv; ++i) {
          double ref = 0;
          for (int64_t p = 0; p <= t; ++p) ref += w[p] / total * stored[p * dk + i];
          EXPECT_NEAR(got[(t * n_heads + h) * dv + i], ref, 1e-4) << "token " << t << " head " << h;
        }
      }
    }
  }
}

}  // namespace
}  // namespace cadenza::kernels
