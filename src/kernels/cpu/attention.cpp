// CPU paged attention: K/V written into block-table slots; each (token, head) attends over its
// sequence's positions 0..pos with an online (flash-style) softmax over fixed chunks of positions.
// The chunks do not follow KV blocks, so the result depends neither on the block size nor on the
// block table, only on the values and the number of positions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/simd/attention.h"

namespace cadenza::kernels::cpu {

namespace {

constexpr int64_t kChunk = simd::kAttendChunk;  // positions per online-softmax step

// The portable path for one query head: scores with the fixed-order dot(), exp, and the weighted
// value sum element by element.
void attend_one(const float* qh, const float* const* k_rows, const float* const* v_rows,
                int64_t n_positions, int32_t dk, int32_t dv, float scale, float* o) {
  float* scratch = thread_scratch(Scratch::Attention, static_cast<size_t>(kChunk + dv));
  float* scores = scratch;
  float* acc = scratch + kChunk;
  std::fill(acc, acc + dv, 0.0f);
  float running_max = -std::numeric_limits<float>::infinity();
  float running_sum = 0.0f;
  for (int64_t start = 0; start < n_positions; start += kChunk) {
    const int64_t count = std::min<int64_t>(kChunk, n_positions - start);
    float chunk_max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < count; ++j) {
      scores[j] = dot(qh, k_rows[start + j], dk) * scale;
      chunk_max = std::max(chunk_max, scores[j]);
    }
    const float new_max = std::max(running_max, chunk_max);
    // Rescale what was accumulated under the old maximum (exp(-inf) = 0 on the first chunk).
    const float correction = std::exp(running_max - new_max);
    running_sum *= correction;
    for (int32_t i = 0; i < dv; ++i) acc[i] *= correction;
    for (int64_t j = 0; j < count; ++j) {
      const float p = std::exp(scores[j] - new_max);
      running_sum += p;
      const float* vp = v_rows[start + j];
      for (int32_t i = 0; i < dv; ++i) acc[i] += p * vp[i];
    }
    running_max = new_max;
  }
  const float inv_sum = 1.0f / running_sum;
  for (int32_t i = 0; i < dv; ++i) o[i] = acc[i] * inv_sum;
}

}  // namespace

void kv_write(ThreadPool& pool, const KvLayer& kv, Matrix k, Matrix v, IndexMatrix slots) {
  const int64_t k_row = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim_k;
  const int64_t v_row = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim_v;
  assert(k.cols == k_row && v.cols == v_row && k.rows == v.rows && slots.rows == k.rows);
  auto* keys = static_cast<float*>(kv.keys);
  auto* values = static_cast<float*>(kv.values);
  const int64_t n_slots = static_cast<int64_t>(kv.num_blocks) * kv.block_size;
  pool.parallel_for(k.rows, [&](int64_t t, int) {
    const int64_t slot = slots.data[t * slots.cols];
    assert(slot >= 0 && slot < n_slots);
    (void)n_slots;
    std::memcpy(keys + slot * k_row, k.data + t * k.stride, static_cast<size_t>(k_row) * sizeof(float));
    std::memcpy(values + slot * v_row, v.data + t * v.stride, static_cast<size_t>(v_row) * sizeof(float));
  });
}

void attention(ThreadPool& pool, Matrix q, const KvLayer& kv, const AttentionBatch& batch,
               int32_t n_heads, float scale, Matrix out) {
  const int32_t n_kv = kv.n_kv_heads;
  const int32_t dk = kv.head_dim_k;
  const int32_t dv = kv.head_dim_v;
  const int32_t block_size = kv.block_size;
  assert(n_kv > 0 && n_heads % n_kv == 0);
  assert(q.cols == static_cast<int64_t>(n_heads) * dk && out.cols == static_cast<int64_t>(n_heads) * dv);
  assert(out.rows == q.rows && batch.positions.rows == q.rows && batch.seq_index.rows == q.rows);
  const int32_t group = n_heads / n_kv;
  const auto* keys = static_cast<const float*>(kv.keys);
  const auto* values = static_cast<const float*>(kv.values);
  const bool vectorised = simd::attend_available(dk, dv);

  // One work item per (token, KV head): the group's query heads share the K/V rows, which are
  // resolved through the block table once per item.
  pool.parallel_for(q.rows * n_kv, [&](int64_t item, int) {
    const int64_t t = item / n_kv;
    const int32_t kv_head = static_cast<int32_t>(item % n_kv);
    const int64_t n_positions = static_cast<int64_t>(batch.positions.data[t]) + 1;
    const int32_t seq = batch.seq_index.data[t];
    const int32_t* table = batch.block_tables.data + static_cast<int64_t>(seq) * batch.block_tables.cols;
    thread_local std::vector<const float*> rows;
    rows.resize(static_cast<size_t>(2 * n_positions));
    const float** k_rows = rows.data();
    const float** v_rows = rows.data() + n_positions;
    for (int64_t p = 0; p < n_positions; ++p) {
      const int64_t block = table[p / block_size];
      assert(block >= 0 && block < kv.num_blocks);
      const int64_t slot = block * block_size + p % block_size;
      k_rows[p] = keys + (slot * n_kv + kv_head) * dk;
      v_rows[p] = values + (slot * n_kv + kv_head) * dv;
    }
    for (int32_t h0 = 0; h0 < group; h0 += simd::kAttendMaxHeads) {
      const int nq = std::min<int32_t>(group - h0, simd::kAttendMaxHeads);
      const float* q_rows[simd::kAttendMaxHeads];
      float* out_rows[simd::kAttendMaxHeads];
      for (int i = 0; i < nq; ++i) {
        const int64_t h = static_cast<int64_t>(kv_head) * group + h0 + i;
        q_rows[i] = q.data + t * q.stride + h * dk;
        out_rows[i] = out.data + t * out.stride + h * dv;
      }
      if (vectorised) {
        float* scratch = thread_scratch(Scratch::Attention,
                                        static_cast<size_t>(simd::attend_scratch_floats(nq, dv)));
        simd::attend(q_rows, nq, k_rows, v_rows, n_positions, dk, dv, scale, out_rows, scratch);
      } else {
        for (int i = 0; i < nq; ++i) {
          attend_one(q_rows[i], k_rows, v_rows, n_positions, dk, dv, scale, out_rows[i]);
        }
      }
    }
  });
}

}  // namespace cadenza::kernels::cpu
