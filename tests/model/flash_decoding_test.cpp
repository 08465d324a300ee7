// Flash-decoding in the CPU backend's paged attention (kernels/cpu/attention.cpp): a long
// sequence's positions are split into fixed simd::kAttendSplit chunks computed in parallel and
// merged in split order. Checked at long lengths (several splits) with an F16 store laid out as
// the backend lays it out (shuffled block tables, Qwen2.5-0.5B's 14-on-2 GQA grouping):
//  - against the softmax formula in double;
//  - thread-count invariance: 1, 2, 3 and 4 threads give the same bits;
//  - batch invariance: a token's output in a batch with other sequences' decode and prefill
//    tokens equals its output alone, bit for bit, including a prefill chunk large enough to be
//    cut into several waves of partial states;
//  - a sliding window (splits counted from the window's first position).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/simd/attention.h"
#include "tensor/quant.h"
#include "backend_test_util.h"
#include "util/thread_pool.h"

namespace cadenza::kernels {
namespace {

constexpr int32_t kHeads = 14, kKv = 2, kDim = 64, kBlock = 16;

// A paged F16 store holding three sequences of the given lengths, with random K/V, and shuffled
// block tables.
struct Store {
  std::vector<int32_t> lengths;
  int32_t max_blocks = 0, num_blocks = 0;
  std::vector<int32_t> tables;  // [n_seqs][max_blocks]
  std::vector<uint8_t> keys, values;
  KvLayer kv;

  explicit Store(std::vector<int32_t> lens) : lengths(std::move(lens)) {
    for (int32_t len : lengths) {
      const int32_t nb = (len + kBlock - 1) / kBlock;
      max_blocks = std::max(max_blocks, nb);
      num_blocks += nb;
    }
    std::vector<int32_t> order(static_cast<size_t>(num_blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(7));
    tables.assign(lengths.size() * static_cast<size_t>(max_blocks), 0);
    size_t next = 0;
    for (size_t s = 0; s < lengths.size(); ++s) {
      for (int32_t b = 0; b < (lengths[s] + kBlock - 1) / kBlock; ++b)
        tables[s * static_cast<size_t>(max_blocks) + static_cast<size_t>(b)] = order[next++];
    }
    const size_t row = static_cast<size_t>(*row_bytes(DType::F16, kDim)) * kKv;
    keys.resize(static_cast<size_t>(num_blocks) * kBlock * row);
    values.resize(keys.size());
    kv = KvLayer{keys.data(), values.data(), DType::F16, num_blocks, kBlock, kKv, kDim, kDim};
    ThreadPool pool(2);
    for (size_t s = 0; s < lengths.size(); ++s) {
      const int64_t n = lengths[s];
      std::vector<float> k = random_floats(static_cast<size_t>(n * kKv * kDim), 100 + static_cast<uint32_t>(s), 2.0f);
      std::vector<float> v = random_floats(static_cast<size_t>(n * kKv * kDim), 200 + static_cast<uint32_t>(s));
      std::vector<int32_t> slots;
      for (int64_t p = 0; p < n; ++p) slots.push_back(slot(s, p));
      cpu::kv_write(pool, kv, Matrix::of(k.data(), n, kKv * kDim), Matrix::of(v.data(), n, kKv * kDim),
                    IndexMatrix::of(slots.data(), n, 1));
    }
  }
  int32_t slot(size_t s, int64_t p) const {
    return tables[s * static_cast<size_t>(max_blocks) + static_cast<size_t>(p / kBlock)] * kBlock +
           static_cast<int32_t>(p % kBlock);
  }
  // Decoded f32 key (or value) of sequence s, position p, KV head g.
  std::vector<float> row(bool key, size_t s, int64_t p, int32_t g) const {
    const size_t rb = static_cast<size_t>(*row_bytes(DType::F16, kDim));
    const uint8_t* src = (key ? keys : values).data() + (static_cast<size_t>(slot(s, p)) * kKv + static_cast<size_t>(g)) * rb;
    std::vector<float> out(kDim);
    dequantize_row(DType::F16, src, out.data(), kDim);
    return out;
  }
};

// Tokens (sequence, position) with their query rows; attention over the store with `threads`
// threads. Returns [n][kHeads * kDim].
std::vector<float> run(const Store& store, const std::vector<std::pair<int32_t, int32_t>>& tokens,
                       const std::vector<float>& q, int threads, int32_t window = 0) {
  ThreadPool pool(threads);
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<int32_t> seq, pos;
  for (const auto& [s, p] : tokens) {
    seq.push_back(s);
    pos.push_back(p);
  }
  std::vector<float> out(static_cast<size_t>(n * kHeads * kDim), NAN);
  std::vector<int32_t> tables = store.tables;
  AttentionBatch batch{IndexMatrix::of(pos.data(), n, 1), IndexMatrix::of(seq.data(), n, 1),
                       IndexMatrix::of(tables.data(), static_cast<int64_t>(store.lengths.size()), store.max_blocks), {}};
  std::vector<float> qq = q;
  cpu::attention(pool, Matrix::of(qq.data(), n, kHeads * kDim), store.kv, batch, kHeads,
                 {.scale = 0.125f, .window = window}, nullptr, Matrix::of(out.data(), n, kHeads * kDim));
  return out;
}

std::vector<float> query_rows(size_t n, uint32_t seed) {
  return random_floats(n * kHeads * kDim, seed, 2.0f);
}

// The row of token i of a run, as a vector.
std::vector<float> token_row(const std::vector<float>& out, size_t i) {
  const size_t w = static_cast<size_t>(kHeads * kDim);
  return {out.begin() + static_cast<long>(i * w), out.begin() + static_cast<long>((i + 1) * w)};
}

TEST(FlashDecoding, LongSequenceMatchesFormulaAndIsThreadCountInvariant) {
  const Store store({2000, 700, 5});
  const int32_t pos = 1999;
  ASSERT_GT(pos + 1, 4 * simd::kAttendSplit);
  for (int32_t window : {0, 600}) {
    SCOPED_TRACE("window " + std::to_string(window));
    const std::vector<float> q = query_rows(1, 31);
    const std::vector<float> one = run(store, {{0, pos}}, q, 1, window);
    for (int threads : {2, 3, 4}) {
      EXPECT_EQ(0, std::memcmp(one.data(), run(store, {{0, pos}}, q, threads, window).data(),
                               one.size() * sizeof(float))) << threads << " threads";
    }
    const int32_t first = window > 0 ? pos - window + 1 : 0;
    for (int32_t h = 0; h < kHeads; ++h) {
      const int32_t g = h / (kHeads / kKv);
      std::vector<double> s;
      double mx = -1e300;
      for (int32_t p = first; p <= pos; ++p) {
        const std::vector<float> k = store.row(true, 0, p, g);
        double d = 0;
        for (int i = 0; i < kDim; ++i) d += static_cast<double>(q[static_cast<size_t>(h * kDim + i)]) * k[static_cast<size_t>(i)];
        s.push_back(d * 0.125);
        mx = std::max(mx, s.back());
      }
      double total = 0;
      for (double& x : s) total += x = std::exp(x - mx);
      std::vector<double> want(kDim, 0.0);
      for (int32_t p = first; p <= pos; ++p) {
        const std::vector<float> v = store.row(false, 0, p, g);
        for (int i = 0; i < kDim; ++i) want[static_cast<size_t>(i)] += s[static_cast<size_t>(p - first)] / total * v[static_cast<size_t>(i)];
      }
      for (int i = 0; i < kDim; ++i) {
        ASSERT_NEAR(one[static_cast<size_t>(h * kDim + i)], want[static_cast<size_t>(i)], 2e-5)
            << "head " << h << " elem " << i;
      }
    }
  }
}

TEST(FlashDecoding, BatchInvariantAtLongLength) {
  const Store store({2000, 1800, 5});
  // A mixed step: a prefill chunk of sequence 1 (positions 0..1799: one to eight splits), the
  // decode token of sequence 0 at 1999 and of sequence 2 at 4; the chunk's partial states (about
  // 6.5M floats) exceed one wave (kMaxPartialFloats in attention.cpp, 4M), so the batch runs in
  // several waves.
  std::vector<std::pair<int32_t, int32_t>> tokens;
  for (int32_t p = 0; p < 1800; ++p) tokens.push_back({1, p});
  tokens.push_back({0, 1999});
  tokens.push_back({2, 4});
  const std::vector<float> q = query_rows(tokens.size(), 41);
  const std::vector<float> batched = run(store, tokens, q, 3);
  const size_t w = static_cast<size_t>(kHeads * kDim);
  for (size_t i = 0; i < tokens.size(); i += (i < 1790 ? 37 : 1)) {
    const std::vector<float> qi(q.begin() + static_cast<long>(i * w), q.begin() + static_cast<long>((i + 1) * w));
    const std::vector<float> alone = run(store, {tokens[i]}, qi, 2);
    EXPECT_EQ(0, std::memcmp(alone.data(), token_row(batched, i).data(), w * sizeof(float)))
        << "token " << i << " (seq " << tokens[i].first << " pos " << tokens[i].second << ")";
  }
}

}  // namespace
}  // namespace cadenza::kernels
