// CPU paged attention: K/V written into block-table slots (converted to the store's element type:
// F32, F16 or Q8_0); each token attends over its sequence's positions 0..pos with an online
// (flash-style) softmax over fixed chunks of positions (simd/attention.h: the AVX-512 path, or the
// scalar reference below avx512 / for head sizes it does not take). Flash-decoding: positions are
// cut into fixed splits of simd::kAttendSplit; the work items are (token, KV head, split), so one
// long sequence uses every thread, and a token of more than one split has its partial states
// merged in split order afterwards (simd::attend_combine). Neither the chunks nor the splits
// follow KV blocks or threads, so the result depends neither on the block size, the block table,
// the thread count nor the batch, only on the values and the number of positions. A sliding window (AttentionParams::window)
// passes only the window's rows, so its chunks start at the window's first position; sinks are
// folded into each head's denominator at the end (simd/attention.h).
#include <algorithm>
#include <cassert>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/simd/attention.h"
#include "tensor/quant.h"

namespace cadenza::kernels::cpu {

namespace {

// Bytes of one head row of n elements in a KV store of `type` (F32, F16, or Q8_0 with n a
// multiple of 32, which kv_write/attention assert).
size_t kv_row_bytes(DType type, int64_t n) { return static_cast<size_t>(row_bytes(type, n).value_or(0)); }

}  // namespace

bool kv_type_supported(DType type) {
  return type == DType::F32 || type == DType::F16 || type == DType::Q8_0;
}

void kv_write(ThreadPool& pool, const KvLayer& kv, Matrix k, Matrix v, IndexMatrix slots) {
  const int64_t k_row = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim_k;
  const int64_t v_row = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim_v;
  assert(k.cols == k_row && slots.rows == k.rows);
  assert(kv.values_in_keys || (v.cols == v_row && k.rows == v.rows));
  assert(simd::attend_type_supported(kv.type, kv.head_dim_k, kv.head_dim_v));
  const size_t k_slot_bytes = kv_row_bytes(kv.type, kv.head_dim_k) * static_cast<size_t>(kv.n_kv_heads);
  const size_t v_slot_bytes = kv_row_bytes(kv.type, kv.head_dim_v) * static_cast<size_t>(kv.n_kv_heads);
  auto* keys = static_cast<uint8_t*>(kv.keys);
  auto* values = static_cast<uint8_t*>(kv.values);
  const int64_t n_slots = static_cast<int64_t>(kv.num_blocks) * kv.block_size;
  pool.parallel_for(k.rows, [&](int64_t t, int) {
    const int64_t slot = slots.data[t * slots.cols];
    assert(slot >= 0 && slot < n_slots);
    (void)n_slots;
    // quantize_row: F16 rounds to nearest even, Q8_0 quantizes each block of 32 on its own (the
    // reference's quantizer). Head rows are contiguous in both the input row and the slot, and
    // (for Q8_0) a multiple of 32 long: converting the whole token row is converting each head
    // row on its own.
    quantize_row(kv.type, k.data + t * k.stride, keys + static_cast<size_t>(slot) * k_slot_bytes, k_row);
    if (!kv.values_in_keys) {
      quantize_row(kv.type, v.data + t * v.stride, values + static_cast<size_t>(slot) * v_slot_bytes, v_row);
    }
  });
}

namespace {

// Flash-decoding scratch: the partial states of one wave of tokens live in one buffer owned by
// the calling thread (grows only). A wave takes tokens while their partials fit this many floats
// (at least one token: a single sequence's partials are about group / kAttendSplit of its K/V
// bytes, e.g. 0.6 MiB for a 128k-token Qwen2.5-0.5B layer).
constexpr int64_t kMaxPartialFloats = int64_t{1} << 22;  // 16 MiB

}  // namespace

void attention(ThreadPool& pool, Matrix q, const KvLayer& kv, const AttentionBatch& batch,
               int32_t n_heads, const AttentionParams& params, const float* sinks, Matrix out) {
  const int32_t n_kv = kv.n_kv_heads;
  const int32_t dk = kv.head_dim_k;
  const int32_t dv = kv.head_dim_v;
  const int32_t block_size = kv.block_size;
  assert(n_kv > 0 && n_heads % n_kv == 0);
  assert(q.cols == static_cast<int64_t>(n_heads) * dk && out.cols == static_cast<int64_t>(n_heads) * dv);
  assert(out.rows == q.rows && batch.positions.rows == q.rows && batch.seq_index.rows == q.rows);
  assert(simd::attend_type_supported(kv.type, dk, dv));
  const int32_t group = n_heads / n_kv;
  const auto* keys = static_cast<const uint8_t*>(kv.keys);
  const auto* values = static_cast<const uint8_t*>(kv.values);
  const size_t k_head_bytes = kv_row_bytes(kv.type, dk);
  const size_t v_head_bytes = kv_row_bytes(kv.type, dv);
  const bool vectorised = simd::attend_available(dk, dv);
  const float scale = params.scale;
  assert(params.window >= 0 && params.chunk >= 0);
  constexpr int64_t kSplit = simd::kAttendSplit;

  // Positions first .. pos of token t: all of them, or the last `window`, or (and) those of
  // pos's chunk.
  const auto first_of = [&](int64_t t) {
    const int64_t pos = batch.positions.data[t];
    const int64_t first = params.window > 0 ? std::max<int64_t>(0, pos - params.window + 1) : 0;
    return params.chunk > 0 ? std::max<int64_t>(first, pos - pos % params.chunk) : first;
  };
  const auto splits_of = [&](int64_t t) {
    return (batch.positions.data[t] - first_of(t) + 1 + kSplit - 1) / kSplit;
  };
  // One (token, KV head, split) partial: [group][dv] accumulators, [group] maxima, [group] sums.
  const int64_t part_floats = static_cast<int64_t>(group) * (dv + 2);

  // Per token of the wave: its first work item and (split tokens) its first partial.
  // The caller's thread_local buffers, named through references: the workers' lambdas must see
  // these objects, not their own threads' instances.
  thread_local std::vector<int64_t> item_start_tl, part_start_tl;
  thread_local std::vector<float> partials_tl;
  std::vector<int64_t>& item_start = item_start_tl;
  std::vector<int64_t>& part_start = part_start_tl;
  std::vector<float>& partials = partials_tl;
  for (int64_t t0 = 0; t0 < q.rows;) {
    item_start.clear();
    part_start.clear();
    int64_t items = 0, parts = 0, t1 = t0;
    for (; t1 < q.rows; ++t1) {
      const int64_t splits = splits_of(t1);
      const int64_t need = splits > 1 ? splits * n_kv * part_floats : 0;
      if (t1 > t0 && parts + need > kMaxPartialFloats) break;
      item_start.push_back(items);
      part_start.push_back(parts);
      items += splits * n_kv;
      parts += need;
    }
    item_start.push_back(items);
    if (static_cast<int64_t>(partials.size()) < parts) partials.resize(static_cast<size_t>(parts));
    float* part_base = partials.data();

    // One work item per (token, KV head, split): the group's query heads share the K/V rows,
    // which are resolved through the block table once per item. A token of one split writes its
    // output; longer ones leave partial states for the combine below.
    pool.parallel_for(items, [&](int64_t item, int) {
      const int64_t local = std::upper_bound(item_start.begin(), item_start.end(), item) - item_start.begin() - 1;
      const int64_t t = t0 + local;
      const int64_t splits = splits_of(t);
      const int64_t within = item - item_start[static_cast<size_t>(local)];
      const int32_t kv_head = static_cast<int32_t>(within / splits);
      const int64_t split = within % splits;
      const int64_t pos = batch.positions.data[t];
      const int64_t first = first_of(t) + split * kSplit;
      const int64_t n_positions = std::min<int64_t>(kSplit, pos - first + 1);
      const int32_t seq = batch.seq_index.data[t];
      const int32_t* table = batch.block_tables.data + static_cast<int64_t>(seq) * batch.block_tables.cols;
      thread_local std::vector<const void*> rows;
      rows.resize(static_cast<size_t>(2 * n_positions));
      const void** k_rows = rows.data();
      const void** v_rows = rows.data() + n_positions;
      for (int64_t i = 0; i < n_positions; ++i) {
        const int64_t p = first + i;
        const int64_t block = table[p / block_size];
        assert(block >= 0 && block < kv.num_blocks);
        const size_t head_row = static_cast<size_t>((block * block_size + p % block_size) * n_kv + kv_head);
        k_rows[i] = keys + head_row * k_head_bytes;
        // The compressed (latent) cache: the value is the start of the key row.
        v_rows[i] = kv.values_in_keys ? k_rows[i] : values + head_row * v_head_bytes;
      }
      float* part = splits > 1 ? part_base + part_start[static_cast<size_t>(local)] +
                                     (static_cast<int64_t>(kv_head) * splits + split) * part_floats
                               : nullptr;
      for (int32_t h0 = 0; h0 < group; h0 += simd::kAttendMaxHeads) {
        const int nq = std::min<int32_t>(group - h0, simd::kAttendMaxHeads);
        const float* q_rows[simd::kAttendMaxHeads];
        const float* head_sinks = sinks ? sinks + static_cast<int64_t>(kv_head) * group + h0 : nullptr;
        float* out_rows[simd::kAttendMaxHeads];
        for (int i = 0; i < nq; ++i) {
          const int64_t h = static_cast<int64_t>(kv_head) * group + h0 + i;
          q_rows[i] = q.data + t * q.stride + h * dk;
          out_rows[i] = part ? part + static_cast<int64_t>(h0 + i) * dv : out.data + t * out.stride + h * dv;
        }
        float* scratch = thread_scratch(Scratch::Attention,
                                        static_cast<size_t>(simd::attend_scratch_floats(nq, dk, dv)));
        if (part) {
          float* part_max = part + static_cast<int64_t>(group) * dv + h0;
          float* part_sum = part_max + group;
          if (vectorised) {
            simd::attend_partial(q_rows, nq, k_rows, v_rows, kv.type, n_positions, dk, dv, scale,
                                 out_rows, part_max, part_sum, scratch);
          } else {
            simd::attend_partial_ref(q_rows, nq, k_rows, v_rows, kv.type, n_positions, dk, dv,
                                     scale, out_rows, part_max, part_sum, scratch);
          }
        } else if (vectorised) {
          simd::attend(q_rows, nq, k_rows, v_rows, kv.type, n_positions, dk, dv, scale, head_sinks,
                       out_rows, scratch);
        } else {
          simd::attend_ref(q_rows, nq, k_rows, v_rows, kv.type, n_positions, dk, dv, scale,
                           head_sinks, out_rows, scratch);
        }
      }
    });

    // The combine, per (token, KV head) of the split tokens, in split order (attention.h).
    if (parts > 0) {
      pool.parallel_for((t1 - t0) * n_kv, [&](int64_t item, int) {
        const int64_t local = item / n_kv;
        const int64_t t = t0 + local;
        const int64_t splits = splits_of(t);
        if (splits <= 1) return;
        const int32_t kv_head = static_cast<int32_t>(item % n_kv);
        const float* base = part_base + part_start[static_cast<size_t>(local)] +
                            static_cast<int64_t>(kv_head) * splits * part_floats;
        for (int32_t i = 0; i < group; ++i) {
          const int64_t h = static_cast<int64_t>(kv_head) * group + i;
          const float* acc = base + static_cast<int64_t>(i) * dv;
          const float* max = base + static_cast<int64_t>(group) * dv + i;
          simd::attend_combine(acc, max, max + group, part_floats, splits, dv,
                               sinks ? sinks + static_cast<int64_t>(kv_head) * group : nullptr, i,
                               out.data + t * out.stride + h * dv);
        }
      });
    }
    t0 = t1;
  }
}

}  // namespace cadenza::kernels::cpu
