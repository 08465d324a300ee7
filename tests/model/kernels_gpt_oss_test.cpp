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

#include "backend_test_util.h"
#include "kernels/cpu/cpu_backend.h"

namespace cadenza::kernels {
namespace {

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::memcmp(&x, &y, sizeof(float)) == 0;
         });
}

// Two sequences in one ragged batch (positions 0..n0-1 and 0..n1-1, interleaved block tables),
// GQA 8 query heads on 2 KV heads, head size 64 (the vector path's size).
struct AttentionSetup {
  static constexpr int32_t n_heads = 8, n_kv = 2, d = 64, block_size = 16, num_blocks = 16;
  static constexpr int64_t n0 = 100, n1 = 37, n = n0 + n1;
  std::vector<int32_t> positions, seq, slots, tables;
  std::vector<float> q, k, v;
  AttentionSetup() {
    tables.assign(2 * 8, 0);
    for (int32_t b = 0; b < 8; ++b) {
      tables[b] = 2 * b + 1;      // sequence 0: odd blocks
      tables[8 + b] = 14 - 2 * b;  // sequence 1: even blocks, backwards
    }
    for (int64_t t = 0; t < n; ++t) {
      const int32_t s = t < n0 ? 0 : 1;
      const int32_t p = static_cast<int32_t>(s == 0 ? t : t - n0);
      positions.push_back(p);
      seq.push_back(s);
      slots.push_back(tables[s * 8 + p / block_size] * block_size + p % block_size);
    }
    q = random_floats(static_cast<size_t>(n * n_heads * d), 31);
    k = random_floats(static_cast<size_t>(n * n_kv * d), 32);
    v = random_floats(static_cast<size_t>(n * n_kv * d), 33);
  }
};

// out = sum_p exp(s_p - m) v_p / (sum_p exp(s_p - m) + exp(sink - m)) over the window.
std::vector<double> naive_attention(const AttentionSetup& a, const std::vector<float>& k,
                                    const std::vector<float>& v, float scale,
                                    const std::vector<float>* sinks, int32_t window,
                                    int32_t chunk = 0) {
  const int32_t H = a.n_heads, KV = a.n_kv, d = a.d, group = H / KV;
  std::vector<double> out(static_cast<size_t>(a.n * H * d));
  for (int64_t t = 0; t < a.n; ++t) {
    const int64_t base = a.seq[t] == 0 ? 0 : a.n0;  // the sequence's first token row
    const int64_t pos = a.positions[t];
    int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    if (chunk > 0) first = std::max<int64_t>(first, pos - pos % chunk);
    for (int32_t h = 0; h < H; ++h) {
      const int32_t kvh = h / group;
      std::vector<double> s;
      double m = sinks ? (*sinks)[h] : -1e300;
      for (int64_t p = first; p <= pos; ++p) {
        double dot = 0;
        for (int32_t i = 0; i < d; ++i) {
          dot += double(a.q[(t * H + h) * d + i]) * k[((base + p) * KV + kvh) * d + i];
        }
        s.push_back(dot * scale);
        m = std::max(m, s.back());
      }
      double total = sinks ? std::exp((*sinks)[h] - m) : 0.0;
      for (double& x : s) total += (x = std::exp(x - m));
      for (int32_t i = 0; i < d; ++i) {
        double acc = 0;
        for (int64_t p = first; p <= pos; ++p) {
          acc += s[p - first] * v[((base + p) * KV + kvh) * d + i];
        }
        out[(t * H + h) * d + i] = acc / total;
      }
    }
  }
  return out;
}

std::vector<float> run_attention(Backend& be, const AttentionSetup& a, DType type,
                                 const AttentionParams& params) {
  const int64_t row = static_cast<int64_t>(*row_bytes(type, a.n_kv * a.d));
  const size_t bytes = static_cast<size_t>(row) * a.num_blocks * a.block_size;
  HostBuffer keys(be, std::vector<float>(bytes / sizeof(float) + 1));
  HostBuffer values(be, std::vector<float>(bytes / sizeof(float) + 1));
  KvLayer kv{keys.matrix(1, 1).data, values.matrix(1, 1).data, type, a.num_blocks, a.block_size,
             a.n_kv, a.d, a.d, false};
  HostBuffer qb(be, a.q), kb(be, a.k), vb(be, a.v), slot_b(be, a.slots), pos_b(be, a.positions),
      seq_b(be, a.seq), table_b(be, a.tables);
  HostBuffer out(be, std::vector<float>(static_cast<size_t>(a.n * a.n_heads * a.d)));
  be.kv_write(kv, kb.matrix(a.n, a.n_kv * a.d), vb.matrix(a.n, a.n_kv * a.d), slot_b.index(a.n, 1));
  const AttentionBatch batch{pos_b.index(a.n, 1), seq_b.index(a.n, 1), table_b.index(2, 8), {}};
  be.attention(qb.matrix(a.n, a.n_heads * a.d), kv, batch, a.n_heads, params,
               out.matrix(a.n, a.n_heads * a.d));
  return out.floats();
}

TEST(GptOssKernels, AttentionWithSinksAndWindowMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const AttentionSetup a;
  const float scale = 0.125f;
  // Sinks around the scores, one far above them (that head attends almost nowhere).
  std::vector<float> sinks = random_floats(a.n_heads, 34, 1.5f);
  sinks[5] = 12.0f;
  std::unique_ptr<Weight> sink_weight = upload(*backend, DType::F32, sinks, a.n_heads);
  struct Case { bool sinks; int32_t window; };
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    const std::vector<float> k = as_stored(type, a.k, a.d), v = as_stored(type, a.v, a.d);
    // Windows: not a multiple of the 32-position chunks, a multiple, one position, none.
    for (const Case& c : {Case{true, 0}, Case{false, 45}, Case{true, 45}, Case{true, 32},
                          Case{true, 1}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(type) << " sinks " << c.sinks << " window "
                                        << c.window);
      AttentionParams p{.scale = scale, .sinks = c.sinks ? sink_weight.get() : nullptr,
                        .window = c.window};
      const std::vector<float> got = run_attention(*backend, a, type, p);
      const std::vector<double> ref = naive_attention(a, k, v, scale, c.sinks ? &sinks : nullptr,
                                                      c.window);
      double max_err = 0;
      for (size_t i = 0; i < got.size(); ++i) max_err = std::max(max_err, std::abs(got[i] - ref[i]));
      EXPECT_LT(max_err, 2e-5);
    }
  }
}

// Llama 4's chunked attention (AttentionParams::chunk): chunks of 16 (a block), 40 (not aligned
// to blocks or the kernel's 32-position chunks), and with a window inside them.
TEST(Llama4Kernels, ChunkedAttentionMatchesNaive) {
  std::unique_ptr<Backend> backend = make_cpu_backend({.n_threads = 2});
  const AttentionSetup a;
  const float scale = 0.125f;
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    const std::vector<float> k = as_stored(type, a.k, a.d), v = as_stored(type, a.v, a.d);
    for (auto [chunk, window] : {std::pair{16, 0}, {40, 0}, {40, 7}, {1, 0}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(type) << " chunk " << chunk << " window "
                                        << window);
      AttentionParams p{.scale = scale, .window = window, .chunk = chunk};
      const std::vector<float> got = run_attention(*backend, a, type, p);
      const std::vector<double> ref = naive_attention(a, k, v, scale, nullptr, window, chunk);
      double max_err = 0;
      for (size_t i = 0; i < got.size(); ++i) max_err = std::max(max_err, std::abs(got[i] - ref[i]));
      EXPECT_LT(max_err, 2e-5);
    }
    // A chunk longer than every sequence is the plain attention, bit for bit.
    EXPECT_TRUE(bitwise_equal(run_attention(*backend, a, type, {.scale = scale}),
                              run_attention(*backend, a, type, {.scale = scale, .chunk = 4096})));
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
    const std::vector<float> plain = run_attention(*backend, a, type, {.scale = 0.125f});
    EXPECT_TRUE(bitwise_equal(plain, run_attention(*backend, a, type,
                                                   {.scale = 0.125f, .sinks = neutral.get()})));
    EXPECT_TRUE(bitwise_equal(plain, run_attention(*backend, a, type,
                                                   {.scale = 0.125f, .window = 1000})));
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
