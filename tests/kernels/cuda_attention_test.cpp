// The CUDA backend's kv_write and paged attention against the CPU backend (F32, F16, Q8_0 KV), and
// their invariance: a token's output is bitwise the same alone or in a batch, and whatever the
// KV block size and block table. Skips visibly without a CUDA device.
//
// Tolerance against the CPU: 2e-5 absolute on outputs that are convex combinations of values in
// [-1, 1] (the two backends sum scores and values in different orders; both store F16 K/V with
// round-to-nearest-even and Q8_0 K/V with the reference quantizer's arithmetic).
#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "tensor/dtype.h"

namespace cadenza::kernels {
namespace {

using test::DevIndex;
using test::DevMatrix;
using test::get;
using test::put;
using test::put_idx;
using test::random_floats;

struct Layout {
  int32_t block_size;
  int32_t num_blocks;
  std::vector<std::vector<int32_t>> tables;  // per sequence
};

// Two sequences of lengths 70 and 33 with shuffled blocks.
Layout make_layout(int32_t block_size, uint32_t seed) {
  const std::vector<int64_t> lengths = {70, 33};
  Layout l;
  l.block_size = block_size;
  int32_t needed = 0;
  for (int64_t len : lengths) needed += static_cast<int32_t>((len + block_size - 1) / block_size);
  l.num_blocks = needed + 3;
  std::vector<int32_t> blocks(static_cast<size_t>(l.num_blocks));
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(seed));
  size_t next = 0;
  for (int64_t len : lengths) {
    std::vector<int32_t> table;
    for (int64_t p = 0; p < len; p += block_size) table.push_back(blocks[next++]);
    l.tables.push_back(table);
  }
  return l;
}

struct Tokens {
  std::vector<int32_t> positions, seq_index;
};

Tokens all_tokens() {
  Tokens t;
  for (int32_t s = 0; s < 2; ++s) {
    for (int32_t p = 0; p < (s == 0 ? 70 : 33); ++p) {
      t.positions.push_back(p);
      t.seq_index.push_back(s);
    }
  }
  return t;
}

constexpr int32_t kHeads = 8, kKvHeads = 2, kDk = 64, kDv = 64;

// Writes K/V of all tokens and runs attention for the tokens [first, first + count) of
// all_tokens(), returning out [count][heads*dv].
std::vector<float> run(Backend& be, DType type, const Layout& l, const std::vector<float>& k,
                       const std::vector<float>& v, const std::vector<float>& q, int64_t first,
                       int64_t count) {
  const Tokens t = all_tokens();
  const int64_t n = static_cast<int64_t>(t.positions.size());
  const size_t slots = static_cast<size_t>(l.num_blocks) * static_cast<size_t>(l.block_size);
  auto keys = be.allocate(slots * kKvHeads * *row_bytes(type, kDk));
  auto values = be.allocate(slots * kKvHeads * *row_bytes(type, kDv));
  EXPECT_TRUE(keys && values);
  KvLayer kv{.keys = (*keys)->data(), .values = (*values)->data(), .type = type,
             .num_blocks = l.num_blocks, .block_size = l.block_size, .n_kv_heads = kKvHeads,
             .head_dim_k = kDk, .head_dim_v = kDv};
  std::vector<int32_t> slot;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t p = t.positions[static_cast<size_t>(i)];
    const auto& table = l.tables[static_cast<size_t>(t.seq_index[static_cast<size_t>(i)])];
    slot.push_back(table[static_cast<size_t>(p / l.block_size)] * l.block_size + p % l.block_size);
  }
  DevMatrix dk = put(be, k, n, kKvHeads * kDk), dv = put(be, v, n, kKvHeads * kDv);
  DevIndex ds = put_idx(be, slot, n, 1);
  be.kv_write(kv, dk.m, dv.m, ds.m);

  const int32_t max_blocks = static_cast<int32_t>(std::max(l.tables[0].size(), l.tables[1].size()));
  std::vector<int32_t> tables(2 * static_cast<size_t>(max_blocks), 0);
  for (size_t s = 0; s < 2; ++s) {
    std::copy(l.tables[s].begin(), l.tables[s].end(), tables.begin() + static_cast<int64_t>(s) * max_blocks);
  }
  const std::vector<int32_t> pos(t.positions.begin() + first, t.positions.begin() + first + count);
  const std::vector<int32_t> seq(t.seq_index.begin() + first, t.seq_index.begin() + first + count);
  DevIndex dpos = put_idx(be, pos, count, 1), dseq = put_idx(be, seq, count, 1);
  DevIndex dtab = put_idx(be, tables, 2, max_blocks);
  const std::vector<float> qs(q.begin() + first * kHeads * kDk, q.begin() + (first + count) * kHeads * kDk);
  DevMatrix dq = put(be, qs, count, kHeads * kDk);
  DevMatrix out = test::zeros(be, count, kHeads * kDv);
  AttentionBatch batch{.positions = dpos.m, .seq_index = dseq.m, .block_tables = dtab.m,
                       .last_positions = {}};
  be.attention(dq.m, kv, batch, kHeads, {.scale = 0.125f}, out.m);
  return get(be, out);
}

TEST(CudaAttention, MatchesCpuAndIsInvariant) {
  CADENZA_REQUIRE_CUDA();
  std::unique_ptr<Backend> cpu = make_cpu_backend({.n_threads = 2});
  Result<std::unique_ptr<Backend>> g = make_cuda_backend();
  ASSERT_TRUE(g) << g.error();
  Backend& gpu = **g;
  const int64_t n = 103;
  const auto k = random_floats(static_cast<size_t>(n * kKvHeads * kDk), 1);
  const auto v = random_floats(static_cast<size_t>(n * kKvHeads * kDv), 2);
  // Larger q so that the softmax is far from uniform.
  const auto q = random_floats(static_cast<size_t>(n * kHeads * kDk), 3, -4.0f, 4.0f);
  const Layout l16 = make_layout(16, 7), l5 = make_layout(5, 8);
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const std::vector<float> all = run(gpu, type, l16, k, v, q, 0, n);
    const std::vector<float> ref = run(*cpu, type, l16, k, v, q, 0, n);
    double worst = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::abs(all[i] - ref[i])));
    }
    std::cout << "[cuda] attention " << dtype_name(type) << ": max |gpu - cpu| = " << worst << "\n";
    EXPECT_LE(worst, 2e-5);
    // Token 69 (last of sequence 0, 3 position chunks) alone; tokens 60..79 (both sequences).
    const int64_t row = kHeads * kDv;
    const std::vector<float> alone = run(gpu, type, l16, k, v, q, 69, 1);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), all.begin() + 69 * row)) << "token alone";
    const std::vector<float> some = run(gpu, type, l16, k, v, q, 60, 20);
    EXPECT_TRUE(std::equal(some.begin(), some.end(), all.begin() + 60 * row)) << "20 tokens";
    // Another block size and block table: the same bits.
    const std::vector<float> other = run(gpu, type, l5, k, v, q, 0, n);
    EXPECT_TRUE(test::bitwise_equal(other, all)) << "block size 5";
  }
}

}  // namespace
}  // namespace cadenza::kernels
