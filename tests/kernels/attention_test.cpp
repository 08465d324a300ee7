// simd::attend (the AVX-512 path) and simd::attend_ref (the scalar reference) from
// kernels/simd/attention.h, on random data:
//  - both against a double-precision formula over the decoded K/V values, for F32, F16 and Q8_0
//    K/V rows;
//  - the vector path against the scalar reference at every level that has it;
//  - the element-type contract: a typed row gives bit for bit the result of its decoded f32 row
//    (on each path);
//  - a paged ragged batch: sequences of different lengths with scattered block tables, GQA groups
//    (query heads sharing a KV head), each (token, KV head) resolved through its block table;
//  - per-head invariance (a head's output does not depend on how many heads share the call), the
//    property batch invariance rests on;
//  - flash-decoding: splits of kAttendSplit positions through attend_partial / attend_partial_ref
//    and merged by attend_combine, against the formula, vector against reference, and one split
//    merged giving exactly what attend gives;
//  - the tile kernel (attend_tile, prefill): every row of a ragged tile bit for bit equal to the
//    single-query path (vector and reference), and the vector tile within the reference's bound;
// and simd::swiglu against its formula.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
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

// out = softmax(scale * q . K) V in double, over f32 rows.
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

size_t row_size(DType t, int n) { return static_cast<size_t>(*row_bytes(t, n)); }

// A store of `rows` rows of n values of type t, filled from random f32 values, plus the rows
// decoded back to f32 (what attention must see).
struct TypedRows {
  DType type;
  int n;
  std::vector<uint8_t> bytes;
  std::vector<float> decoded;

  TypedRows(Rng& rng, DType t, int64_t rows, int n_) : type(t), n(n_) {
    const size_t rb = row_size(t, n);
    bytes.resize(static_cast<size_t>(rows) * rb);
    decoded.resize(static_cast<size_t>(rows * n));
    std::vector<float> src(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      // Rows of different magnitudes so that Q8_0 scales and f16 exponents vary.
      const float sigma = std::pow(10.0f, uniform(rng, -1.0f, 0.5f));
      for (float& x : src) x = normal(rng, sigma);
      quantize_row(t, src.data(), bytes.data() + r * rb, n);
      dequantize_row(t, bytes.data() + r * rb, decoded.data() + r * n, n);
    }
  }
  const void* row(int64_t r) const { return bytes.data() + static_cast<size_t>(r) * row_size(type, n); }
  const float* decoded_row(int64_t r) const { return decoded.data() + r * n; }
};

using AttendFn = void (*)(const float* const*, int, const void* const*, const void* const*, DType,
                          int64_t, int, int, float, const float*, float* const*, float*);

// Runs `fn` for nq query heads over the given rows; returns [nq][dv].
std::vector<float> run_attend(AttendFn fn, const std::vector<const float*>& q,
                              const std::vector<const void*>& k, const std::vector<const void*>& v,
                              DType type, int dk, int dv, float scale) {
  const int nq = static_cast<int>(q.size());
  std::vector<float> out(static_cast<size_t>(nq * dv), NAN);
  std::vector<float*> o(static_cast<size_t>(nq));
  for (int h = 0; h < nq; ++h) o[static_cast<size_t>(h)] = out.data() + h * dv;
  std::vector<float> scratch(static_cast<size_t>(attend_scratch_floats(nq, dk, dv)), NAN);
  fn(q.data(), nq, k.data(), v.data(), type, static_cast<int64_t>(k.size()), dk, dv, scale,
     nullptr, o.data(), scratch.data());
  return out;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The head shapes covered: the common unrolled sizes (64, 128), a generic multiple of 32 with
// dk != dv, and (F32/F16 only) sizes the vector path does not take or takes only as multiples of
// 16.
struct HeadShape {
  int dk, dv;
};
std::vector<HeadShape> shapes_for(DType t) {
  std::vector<HeadShape> s = {{64, 64}, {128, 128}, {32, 96}};
  if (t != DType::Q8_0) {
    s.push_back({16, 48});
    s.push_back({8, 6});
  }
  return s;
}

TEST_P(AttendTest, EveryTypeMatchesDoubleFormulaAndTheReference) {
  IsaScope scope(GetParam());
  SCOPED_TRACE(seed_trace());
  Rng rng(test_seed() + 11);
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    for (const HeadShape& hs : shapes_for(type)) {
      const int dk = hs.dk, dv = hs.dv;
      ASSERT_TRUE(attend_type_supported(type, dk, dv));
      const bool vector = attend_available(dk, dv);
      for (int nq : {1, 7, 16}) {
        for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{33}, int64_t{100}}) {
          SCOPED_TRACE(std::string(dtype_name(type)) + " dk " + std::to_string(dk) + " dv " +
                       std::to_string(dv) + " nq " + std::to_string(nq) + " n " + std::to_string(n));
          const TypedRows ks(rng, type, n, dk), vs(rng, type, n, dv);
          std::vector<float> qs(static_cast<size_t>(nq * dk));
          for (auto& x : qs) x = normal(rng, 1.0f);
          // Rows in reverse order in memory: attend must follow the pointers.
          std::vector<const void*> k(static_cast<size_t>(n)), v(static_cast<size_t>(n)),
              k32(static_cast<size_t>(n)), v32(static_cast<size_t>(n));
          std::vector<const float*> kd(static_cast<size_t>(n)), vd(static_cast<size_t>(n));
          for (int64_t p = 0; p < n; ++p) {
            const size_t i = static_cast<size_t>(p);
            k[i] = ks.row(n - 1 - p);
            v[i] = vs.row(n - 1 - p);
            k32[i] = kd[i] = ks.decoded_row(n - 1 - p);
            v32[i] = vd[i] = vs.decoded_row(n - 1 - p);
          }
          std::vector<const float*> q(static_cast<size_t>(nq));
          for (int h = 0; h < nq; ++h) q[static_cast<size_t>(h)] = qs.data() + h * dk;
          const float scale = 1.0f / std::sqrt(static_cast<float>(dk));

          const std::vector<float> ref = run_attend(attend_ref, q, k, v, type, dk, dv, scale);
          EXPECT_TRUE(bitwise_equal(ref, run_attend(attend_ref, q, k32, v32, DType::F32, dk, dv, scale)))
              << "reference: typed rows differ from their decoded f32 rows";
          std::vector<float> vec;
          if (vector) {
            vec = run_attend(attend, q, k, v, type, dk, dv, scale);
            EXPECT_TRUE(bitwise_equal(vec, run_attend(attend, q, k32, v32, DType::F32, dk, dv, scale)))
                << "vector: typed rows differ from their decoded f32 rows";
          }
          for (int h = 0; h < nq; ++h) {
            const std::vector<double> want = naive_attention(q[static_cast<size_t>(h)], kd, vd, dk, dv, scale);
            for (int i = 0; i < dv; ++i) {
              const size_t at = static_cast<size_t>(h * dv + i);
              const double w = want[static_cast<size_t>(i)];
              EXPECT_NEAR(ref[at], w, 2e-5 * (1.0 + std::abs(w))) << "reference head " << h << " elem " << i;
              if (vector) {
                EXPECT_NEAR(vec[at], w, 2e-5 * (1.0 + std::abs(w))) << "vector head " << h << " elem " << i;
                EXPECT_NEAR(vec[at], ref[at], 2e-5 * (1.0 + std::abs(w))) << "vs reference, head " << h;
              }
            }
            // Per-head invariance: the head alone gives the bits it got in the group.
            const std::vector<const float*> one = {q[static_cast<size_t>(h)]};
            const std::vector<float> ref1 = run_attend(attend_ref, one, k, v, type, dk, dv, scale);
            EXPECT_EQ(0, std::memcmp(ref1.data(), ref.data() + h * dv, static_cast<size_t>(dv) * sizeof(float)))
                << "reference, head " << h;
            if (vector) {
              const std::vector<float> vec1 = run_attend(attend, one, k, v, type, dk, dv, scale);
              EXPECT_EQ(0, std::memcmp(vec1.data(), vec.data() + h * dv, static_cast<size_t>(dv) * sizeof(float)))
                  << "vector, head " << h;
            }
          }
        }
      }
    }
  }
}

// A paged KV store of one layer, laid out as the CPU backend lays it out (kernels::KvLayer):
// slot s of KV head g at row s * n_kv + g, each row row_size(type, d) bytes. Three sequences of
// different lengths share it through shuffled block tables; every position of every sequence is
// a query token (a ragged prefill batch) with n_heads query heads in GQA groups of
// n_heads / n_kv. Each (token, KV head) is computed as the backend computes it: rows resolved
// through the block table, the group split into calls of at most kAttendMaxHeads heads.
TEST_P(AttendTest, PagedRaggedGqaBatchMatchesReference) {
  IsaScope scope(GetParam());
  SCOPED_TRACE(seed_trace());
  Rng rng(test_seed() + 13);
  struct Case {
    int n_heads, n_kv, dk, dv;
  };
  // Qwen2.5-0.5B's grouping (14 query heads on 2 KV heads, 64 dims), a group wider than one call
  // (20 on 1), and an 8-on-4 grouping with unequal head sizes.
  for (const Case& c : {Case{14, 2, 64, 64}, Case{20, 1, 32, 32}, Case{8, 4, 128, 64}}) {
    for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
      SCOPED_TRACE(std::string(dtype_name(type)) + " heads " + std::to_string(c.n_heads) + "/" +
                   std::to_string(c.n_kv) + " dk " + std::to_string(c.dk) + " dv " + std::to_string(c.dv));
      const int block_size = 16, num_blocks = 20;
      const std::vector<int> lengths = {70, 1, 45};
      std::vector<int32_t> blocks(num_blocks);
      std::iota(blocks.begin(), blocks.end(), 0);
      std::shuffle(blocks.begin(), blocks.end(), rng);
      std::vector<std::vector<int32_t>> tables;
      size_t next = 0;
      for (int len : lengths) {
        const size_t nb = static_cast<size_t>((len + block_size - 1) / block_size);
        tables.emplace_back(blocks.begin() + static_cast<long>(next), blocks.begin() + static_cast<long>(next + nb));
        next += nb;
      }
      ASSERT_LE(next, static_cast<size_t>(num_blocks));
      const int64_t store_rows = static_cast<int64_t>(num_blocks) * block_size * c.n_kv;
      const TypedRows keys(rng, type, store_rows, c.dk), values(rng, type, store_rows, c.dv);
      const int group = c.n_heads / c.n_kv;
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
      const bool vector = attend_available(c.dk, c.dv);
      std::vector<float> qrow(static_cast<size_t>(c.n_heads * c.dk));
      for (size_t s = 0; s < lengths.size(); ++s) {
        for (int pos = 0; pos < lengths[s]; ++pos) {
          for (auto& x : qrow) x = normal(rng, 1.0f);
          for (int g = 0; g < c.n_kv; ++g) {
            const int64_t n = pos + 1;
            std::vector<const void*> k, v;
            std::vector<const float*> kd, vd;
            for (int64_t p = 0; p < n; ++p) {
              const int64_t slot = static_cast<int64_t>(tables[s][static_cast<size_t>(p / block_size)]) * block_size + p % block_size;
              const int64_t row = slot * c.n_kv + g;
              k.push_back(keys.row(row));
              v.push_back(values.row(row));
              kd.push_back(keys.decoded_row(row));
              vd.push_back(values.decoded_row(row));
            }
            for (int h0 = 0; h0 < group; h0 += kAttendMaxHeads) {
              const int nq = std::min(group - h0, kAttendMaxHeads);
              std::vector<const float*> q;
              for (int i = 0; i < nq; ++i) q.push_back(qrow.data() + (g * group + h0 + i) * c.dk);
              const std::vector<float> ref = run_attend(attend_ref, q, k, v, type, c.dk, c.dv, scale);
              std::vector<float> vec;
              if (vector) vec = run_attend(attend, q, k, v, type, c.dk, c.dv, scale);
              for (int i = 0; i < nq; ++i) {
                const std::vector<double> want = naive_attention(q[static_cast<size_t>(i)], kd, vd, c.dk, c.dv, scale);
                for (int e = 0; e < c.dv; ++e) {
                  const size_t at = static_cast<size_t>(i * c.dv + e);
                  const double w = want[static_cast<size_t>(e)];
                  ASSERT_NEAR(ref[at], w, 2e-5 * (1.0 + std::abs(w)))
                      << "reference: seq " << s << " pos " << pos << " head " << g * group + h0 + i;
                  if (vector) {
                    ASSERT_NEAR(vec[at], ref[at], 2e-5 * (1.0 + std::abs(w)))
                        << "vector vs reference: seq " << s << " pos " << pos << " head " << g * group + h0 + i;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

using PartialFn = void (*)(const float* const*, int, const void* const*, const void* const*, DType,
                           int64_t, int, int, float, float* const*, float*, float*, float*);

// Flash-decoding as the CPU backend runs it: splits of kAttendSplit positions, each through `fn`
// into [split][nq * dv + 2 * nq] partial states, merged per head by attend_combine. [nq][dv].
std::vector<float> run_split(PartialFn fn, const std::vector<const float*>& q,
                             const std::vector<const void*>& k, const std::vector<const void*>& v,
                             DType type, int dk, int dv, float scale, const float* sinks) {
  const int nq = static_cast<int>(q.size());
  const int64_t n = static_cast<int64_t>(k.size());
  const int64_t splits = (n + kAttendSplit - 1) / kAttendSplit;
  const int64_t stride = static_cast<int64_t>(nq) * (dv + 2);
  std::vector<float> parts(static_cast<size_t>(splits * stride), NAN);
  std::vector<float> scratch(static_cast<size_t>(attend_scratch_floats(nq, dk, dv)), NAN);
  for (int64_t s = 0; s < splits; ++s) {
    float* base = parts.data() + s * stride;
    std::vector<float*> o(static_cast<size_t>(nq));
    for (int h = 0; h < nq; ++h) o[static_cast<size_t>(h)] = base + h * dv;
    const int64_t start = s * kAttendSplit, count = std::min<int64_t>(kAttendSplit, n - start);
    fn(q.data(), nq, k.data() + start, v.data() + start, type, count, dk, dv, scale, o.data(),
       base + nq * dv, base + nq * dv + nq, scratch.data());
  }
  std::vector<float> out(static_cast<size_t>(nq * dv), NAN);
  for (int h = 0; h < nq; ++h) {
    attend_combine(parts.data() + h * dv, parts.data() + nq * dv + h, parts.data() + nq * dv + nq + h,
                   stride, splits, dv, sinks, h, out.data() + h * dv);
  }
  return out;
}

TEST_P(AttendTest, FlashDecodingSplitsMatchFormulaAndReference) {
  IsaScope scope(GetParam());
  SCOPED_TRACE(seed_trace());
  Rng rng(test_seed() + 14);
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    for (const HeadShape& hs : {HeadShape{64, 64}, HeadShape{32, 96}}) {
      const int dk = hs.dk, dv = hs.dv, nq = 7;
      const bool vector = attend_available(dk, dv);
      for (int64_t n : {int64_t{1}, int64_t{kAttendSplit}, int64_t{kAttendSplit + 1}, int64_t{1000}, int64_t{2100}}) {
        SCOPED_TRACE(std::string(dtype_name(type)) + " dk " + std::to_string(dk) + " dv " +
                     std::to_string(dv) + " n " + std::to_string(n));
        const TypedRows ks(rng, type, n, dk), vs(rng, type, n, dv);
        std::vector<float> qs(static_cast<size_t>(nq * dk));
        // Large scores (sigma 3 per element) so that the per-split maxima differ widely and the
        // combine's rescaling matters.
        for (auto& x : qs) x = normal(rng, 3.0f);
        std::vector<const void*> k, v;
        std::vector<const float*> kd, vd;
        for (int64_t p = 0; p < n; ++p) {
          k.push_back(ks.row(p));
          v.push_back(vs.row(p));
          kd.push_back(ks.decoded_row(p));
          vd.push_back(vs.decoded_row(p));
        }
        std::vector<const float*> q;
        for (int h = 0; h < nq; ++h) q.push_back(qs.data() + h * dk);
        const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
        const std::vector<float> ref = run_split(attend_partial_ref, q, k, v, type, dk, dv, scale, nullptr);
        std::vector<float> vec;
        if (vector) vec = run_split(attend_partial, q, k, v, type, dk, dv, scale, nullptr);
        if (n <= kAttendSplit) {
          // One split merged is exactly the unsplit loop.
          EXPECT_TRUE(bitwise_equal(ref, run_attend(attend_ref, q, k, v, type, dk, dv, scale)));
          if (vector) {
            EXPECT_TRUE(bitwise_equal(vec, run_attend(attend, q, k, v, type, dk, dv, scale)));
          }
        }
        for (int h = 0; h < nq; ++h) {
          const std::vector<double> want = naive_attention(q[static_cast<size_t>(h)], kd, vd, dk, dv, scale);
          for (int i = 0; i < dv; ++i) {
            const size_t at = static_cast<size_t>(h * dv + i);
            const double w = want[static_cast<size_t>(i)];
            ASSERT_NEAR(ref[at], w, 2e-5 * (1.0 + std::abs(w))) << "reference head " << h << " elem " << i;
            if (vector) {
              ASSERT_NEAR(vec[at], ref[at], 2e-5 * (1.0 + std::abs(w))) << "vector head " << h;
            }
          }
        }
      }
    }
  }
}

// attend_tile: a tile of query tokens of one sequence over one split's rows. Every row must be
// bit for bit what the single-query path gives it alone (attend / attend_partial on the vector
// path, attend_ref / attend_partial_ref on the reference), whatever the tile: ragged token
// lengths (chunk remainders; a prompt chunk's diagonal), odd row counts, some tokens final (with
// sinks) and some partial, every KV type and head shape; and the vector tile within the bound of
// the reference.
TEST_P(AttendTest, TileRowsEqualTheSingleQueryPathBitwise) {
  IsaScope scope(GetParam());
  SCOPED_TRACE(seed_trace());
  Rng rng(test_seed() + 16);
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    for (const HeadShape& hs : shapes_for(type)) {
      const int dk = hs.dk, dv = hs.dv;
      const bool vector = attend_available(dk, dv);
      struct Lengths {
        int nq;
        std::vector<int64_t> n;
      };
      // A causal diagonal inside one chunk and across a chunk edge, a full split with a short
      // token, a single token, and a full tile of ragged lengths.
      std::vector<Lengths> cases = {{7, {20, 21, 22, 23, 24, 25, 26, 27, 28}},
                                    {2, {30, 31, 32, 33, 34}},
                                    {5, {kAttendSplit, kAttendSplit, 1, 100}},
                                    {1, {77}},
                                    {16, {}}};
      for (int t = 0; t < kAttendTileTokens; ++t) cases.back().n.push_back(1 + static_cast<int64_t>(rng() % kAttendSplit));
      for (const Lengths& lc : cases) {
        const int nq = lc.nq, nt = static_cast<int>(lc.n.size());
        const int64_t n_max = *std::max_element(lc.n.begin(), lc.n.end());
        SCOPED_TRACE(std::string(dtype_name(type)) + " dk " + std::to_string(dk) + " dv " +
                     std::to_string(dv) + " nq " + std::to_string(nq) + " nt " + std::to_string(nt) +
                     " n_max " + std::to_string(n_max));
        const TypedRows ks(rng, type, n_max, dk), vs(rng, type, n_max, dv);
        std::vector<const void*> k, v;
        std::vector<const float*> kd, vd;
        for (int64_t p = 0; p < n_max; ++p) {  // rows reversed in memory: pointers are followed
          k.push_back(ks.row(n_max - 1 - p));
          v.push_back(vs.row(n_max - 1 - p));
          kd.push_back(ks.decoded_row(n_max - 1 - p));
          vd.push_back(vs.decoded_row(n_max - 1 - p));
        }
        std::vector<float> qs(static_cast<size_t>(nt * nq * dk)), sinks(static_cast<size_t>(nq));
        for (auto& x : qs) x = normal(rng, 2.0f);
        for (auto& x : sinks) x = normal(rng, 1.0f);
        std::vector<const float*> q;
        for (int r = 0; r < nt * nq; ++r) q.push_back(qs.data() + r * dk);
        const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
        // Tokens alternate final / partial.
        const auto partial = [](int t) { return t % 2 == 1; };
        // Runs the tile through `fn`; returns per row dv outputs, then (partial tokens) max, sum.
        const auto run_tile = [&](void (*fn)(const AttendTile&, float*)) {
          std::vector<float> out(static_cast<size_t>(nt * nq * dv), NAN), stats(static_cast<size_t>(nt * 2 * nq), NAN);
          std::vector<float*> o, pm(static_cast<size_t>(nt), nullptr), ps(static_cast<size_t>(nt), nullptr);
          for (int r = 0; r < nt * nq; ++r) o.push_back(out.data() + r * dv);
          for (int t = 0; t < nt; ++t) {
            if (!partial(t)) continue;
            pm[static_cast<size_t>(t)] = stats.data() + t * 2 * nq;
            ps[static_cast<size_t>(t)] = stats.data() + t * 2 * nq + nq;
          }
          std::vector<float> scratch(static_cast<size_t>(attend_tile_scratch_floats(nt, nq, dk, dv)), NAN);
          AttendTile tile;
          tile.q = q.data();
          tile.nq = nq;
          tile.nt = nt;
          tile.n = lc.n.data();
          tile.k_rows = k.data();
          tile.v_rows = v.data();
          tile.type = type;
          tile.dk = dk;
          tile.dv = dv;
          tile.scale = scale;
          tile.sinks = sinks.data();
          tile.out = o.data();
          tile.part_max = pm.data();
          tile.part_sum = ps.data();
          fn(tile, scratch.data());
          out.insert(out.end(), stats.begin(), stats.end());
          return out;
        };
        // The same rows one token at a time through the single-query entry points.
        const auto run_alone = [&](bool use_vector) {
          std::vector<float> out(static_cast<size_t>(nt * nq * dv), NAN), stats(static_cast<size_t>(nt * 2 * nq), NAN);
          std::vector<float> scratch(static_cast<size_t>(attend_scratch_floats(nq, dk, dv)), NAN);
          for (int t = 0; t < nt; ++t) {
            std::vector<float*> o;
            for (int h = 0; h < nq; ++h) o.push_back(out.data() + (t * nq + h) * dv);
            const float* const* qt = q.data() + t * nq;
            const int64_t n = lc.n[static_cast<size_t>(t)];
            if (partial(t)) {
              float* pm = stats.data() + t * 2 * nq;
              (use_vector ? attend_partial : attend_partial_ref)(qt, nq, k.data(), v.data(), type, n, dk, dv, scale,
                                                                 o.data(), pm, pm + nq, scratch.data());
            } else {
              (use_vector ? attend : attend_ref)(qt, nq, k.data(), v.data(), type, n, dk, dv, scale,
                                                 sinks.data(), o.data(), scratch.data());
            }
          }
          out.insert(out.end(), stats.begin(), stats.end());
          return out;
        };
        const std::vector<float> ref_tile = run_tile(attend_tile_ref);
        EXPECT_TRUE(bitwise_equal(ref_tile, run_alone(false))) << "reference tile vs attend_ref alone";
        if (!vector) continue;
        const std::vector<float> vec_tile = run_tile(attend_tile);
        const std::vector<float> vec_alone = run_alone(true);
        for (size_t i = 0; i < vec_tile.size(); ++i) {
          uint32_t a, b;
          std::memcpy(&a, &vec_tile[i], 4);
          std::memcpy(&b, &vec_alone[i], 4);
          ASSERT_EQ(a, b) << "vector tile vs attend alone, float " << i << ": " << vec_tile[i] << " vs " << vec_alone[i];
        }
        // And the vector tile against the reference (the formula's bound, as above); partial
        // states compared through their normalised accumulators.
        for (int t = 0; t < nt; ++t) {
          for (int h = 0; h < nq; ++h) {
            const int r = t * nq + h;
            const size_t st = static_cast<size_t>(nt * nq * dv + t * 2 * nq + h);
            const float fv = partial(t) ? 1.0f / vec_tile[st + static_cast<size_t>(nq)] : 1.0f;
            const float fr = partial(t) ? 1.0f / ref_tile[st + static_cast<size_t>(nq)] : 1.0f;
            if (partial(t)) {
              EXPECT_NEAR(vec_tile[st], ref_tile[st], 1e-5 * (1.0 + std::abs(ref_tile[st]))) << "max, row " << r;
            }
            for (int e = 0; e < dv; ++e) {
              const size_t at = static_cast<size_t>(r * dv + e);
              const double w = ref_tile[at] * fr;
              ASSERT_NEAR(vec_tile[at] * fv, w, 2e-5 * (1.0 + std::abs(w))) << "row " << r << " elem " << e;
            }
          }
        }
      }
    }
  }
}

// Sinks are applied once, by the combine: a sink logit joins the denominator of the whole
// sequence, not of each split.
TEST(AttendCombine, SinkJoinsTheDenominatorOnce) {
  Rng rng(test_seed() + 15);
  const int dk = 8, dv = 6, n = 3 * kAttendSplit + 5;
  const TypedRows ks(rng, DType::F32, n, dk), vs(rng, DType::F32, n, dv);
  std::vector<float> qv(static_cast<size_t>(dk));
  for (auto& x : qv) x = normal(rng, 1.0f);
  std::vector<const void*> k, v;
  std::vector<const float*> kd, vd;
  for (int p = 0; p < n; ++p) {
    k.push_back(ks.row(p));
    v.push_back(vs.row(p));
    kd.push_back(ks.decoded_row(p));
    vd.push_back(vs.decoded_row(p));
  }
  const float sink = 2.5f, scale = 0.35f;
  const std::vector<float> got = run_split(attend_partial_ref, {qv.data()}, k, v, DType::F32, dk, dv, scale, &sink);
  // Formula: out = sum_p e^{s_p} v_p / (sum_p e^{s_p} + e^{sink}).
  std::vector<double> s(static_cast<size_t>(n));
  double mx = sink;
  for (int p = 0; p < n; ++p) {
    double d = 0;
    for (int i = 0; i < dk; ++i) d += static_cast<double>(qv[static_cast<size_t>(i)]) * kd[static_cast<size_t>(p)][i];
    s[static_cast<size_t>(p)] = d * scale;
    mx = std::max(mx, s[static_cast<size_t>(p)]);
  }
  double total = std::exp(sink - mx);
  for (double& x : s) total += x = std::exp(x - mx);
  for (int i = 0; i < dv; ++i) {
    double want = 0;
    for (int p = 0; p < n; ++p) want += s[static_cast<size_t>(p)] / total * vd[static_cast<size_t>(p)][i];
    EXPECT_NEAR(got[static_cast<size_t>(i)], want, 2e-5 * (1.0 + std::abs(want))) << i;
  }
}

TEST(AttendTypes, SupportedTypesAndShapes) {
  EXPECT_TRUE(attend_type_supported(DType::F32, 8, 6));
  EXPECT_TRUE(attend_type_supported(DType::F16, 8, 6));
  EXPECT_TRUE(attend_type_supported(DType::Q8_0, 64, 32));
  EXPECT_FALSE(attend_type_supported(DType::Q8_0, 16, 16));  // a block would straddle two heads
  EXPECT_FALSE(attend_type_supported(DType::Q8_0, 64, 48));
  EXPECT_FALSE(attend_type_supported(DType::Q4_0, 64, 64));
  EXPECT_FALSE(attend_type_supported(DType::BF16, 64, 64));
  EXPECT_FALSE(attend_type_supported(DType::F16, 0, 64));
}

TEST_P(AttendTest, SwigluMatchesDoubleFormula) {
  IsaScope scope(GetParam());
  SCOPED_TRACE(seed_trace());
  // The vector SwiGLU exists from avx512 up (attention.h); below, the check is that it says so.
  if (!attend_available(16, 16)) {
    EXPECT_LT(scope.got(), Isa::avx512);
    return;
  }
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
