// The reference of the attention kernel tests (kernels_gpt_oss_test.cpp, kernels_llama4_test.cpp):
// a ragged batch of two sequences in a paged KV cache (AttentionSetup), the attention in double
// with per-head sinks, a sliding window and chunks (naive_attention), the backend's attention
// over the same batch (run_attention) and the largest difference of the two (max_attention_error).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend_test_util.h"
#include "kernels/backend.h"
#include "tensor/quant.h"

namespace cadenza::kernels {

// Two sequences in one ragged batch (positions 0..n0-1 and 0..n1-1, interleaved block tables),
// GQA 8 query heads on 2 KV heads, head size 64 (the vector path's size).
struct AttentionSetup {
  static constexpr int32_t n_heads = 8, n_kv = 2, d = 64, block_size = 16, num_blocks = 16;
  static constexpr int64_t n0 = 100, n1 = 37, n = n0 + n1;
  static constexpr float scale = 0.125f;  // the softmax scale: 1 / sqrt(d)
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
inline std::vector<double> naive_attention(const AttentionSetup& a, const std::vector<float>& k,
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

inline std::vector<float> run_attention(Backend& be, const AttentionSetup& a, DType type,
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

// The largest |backend - naive| over the batch with `params` on a KV cache of `type` (the naive
// formula reads K and V as stored in that type); `sinks` are the host values of params.sinks.
inline double max_attention_error(Backend& be, const AttentionSetup& a, DType type,
                                  const AttentionParams& params,
                                  const std::vector<float>* sinks = nullptr) {
  const std::vector<float> k = as_stored(type, a.k, a.d), v = as_stored(type, a.v, a.d);
  const std::vector<float> got = run_attention(be, a, type, params);
  const std::vector<double> ref =
      naive_attention(a, k, v, params.scale, sinks, params.window, params.chunk);
  double max_err = 0;
  for (size_t i = 0; i < got.size(); ++i) max_err = std::max(max_err, std::abs(got[i] - ref[i]));
  return max_err;
}

}  // namespace cadenza::kernels
