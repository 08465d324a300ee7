// CPU paged attention: K/V written into block-table slots (converted to the store's element type:
// F32, F16 or Q8_0); each token attends over its sequence's positions 0..pos (0..its span's last
// position with AttentionBatch::last_positions: non-causal spans) with an online
// (flash-style) softmax over fixed chunks of positions (simd/attention.h: the AVX-512 path, or the
// scalar reference below avx512 / for head sizes it does not take). Flash-decoding: positions are
// cut into fixed splits of simd::kAttendSplit; the work items are (token, KV head, split), so one
// long sequence uses every thread, and a token of more than one split has its partial states
// merged in split order afterwards (simd::attend_combine). Neither the chunks nor the splits
// follow KV blocks or threads, so the result depends neither on the block size, the block table,
// the thread count nor the batch, only on the values and the number of positions. A sliding window (AttentionParams::window)
// passes only the window's rows, so its chunks start at the window's first position; sinks are
// folded into each head's denominator at the end (simd/attention.h). Prefill: consecutive tokens
// of one sequence with the same first position (no window, or one Llama 4 chunk) form tiles run by
// simd::attend_tile, which decodes each K/V chunk once for all of a tile's rows and gives each row
// the bits the single-query loop gives it (a sliding window gives every token its own first
// position, so such tokens stay tiles of one: the single-query loop).
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

// The fewest query rows (tokens x heads) a call of simd::attend_tile takes; smaller tiles (a
// decode token of a small GQA group, the last tokens of a prompt) run token by token.
constexpr int kMinTileRows = 8;

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

  // Positions first .. last of token t: all of them up to its own position (or up to the end of
  // its span: AttentionBatch::last_positions), or from the last `window` before its own
  // position, or (and) those of its position's chunk.
  assert(batch.last_positions.rows == 0 || batch.last_positions.rows == q.rows);
  const auto first_of = [&](int64_t t) {
    const int64_t pos = batch.positions.data[t];
    const int64_t first = params.window > 0 ? std::max<int64_t>(0, pos - params.window + 1) : 0;
    return params.chunk > 0 ? std::max<int64_t>(first, pos - pos % params.chunk) : first;
  };
  const auto last_of = [&](int64_t t) -> int64_t {
    return batch.last_positions.rows > 0 ? batch.last_positions.data[t] : batch.positions.data[t];
  };
  const auto splits_of = [&](int64_t t) {
    return (last_of(t) - first_of(t) + 1 + kSplit - 1) / kSplit;
  };
  // One (token, KV head, split) partial: [group][dv] accumulators, [group] maxima, [group] sums.
  const int64_t part_floats = static_cast<int64_t>(group) * (dv + 2);

  // Tiles: runs of consecutive batch tokens of one sequence with the same first position (so
  // the same split boundaries), at most tile_tokens of them (~64 query rows), computed together
  // by simd::attend_tile so that each K/V chunk is decoded once for the whole tile. Every row
  // gets the bits it would get alone (attention.h), so the tiling, like the waves and the
  // threads, changes nothing but the speed. A decode token is a tile of one (attend / attend_ref).
  const int tile_tokens = std::clamp(64 / std::min(group, simd::kAttendMaxHeads), 1, simd::kAttendTileTokens);

  // Per token of the wave: (split tokens) its first partial. Per tile: its first token, its first
  // work item (the tile's splits: those of its longest token, times n_kv).
  // The caller's thread_local buffers, named through references: the workers' lambdas must see
  // these objects, not their own threads' instances.
  thread_local std::vector<int64_t> tile_first_tl, tile_item_tl, part_start_tl;
  thread_local std::vector<float> partials_tl;
  std::vector<int64_t>& tile_first = tile_first_tl;
  std::vector<int64_t>& tile_item = tile_item_tl;
  std::vector<int64_t>& part_start = part_start_tl;
  std::vector<float>& partials = partials_tl;
  for (int64_t t0 = 0; t0 < q.rows;) {
    tile_first.clear();
    tile_item.clear();
    part_start.clear();
    int64_t items = 0, parts = 0, t1 = t0, tile_splits = 0;
    for (; t1 < q.rows; ++t1) {
      const int64_t splits = splits_of(t1);
      const int64_t need = splits > 1 ? splits * n_kv * part_floats : 0;
      if (t1 > t0 && parts + need > kMaxPartialFloats) break;
      const int64_t tf = tile_first.empty() ? -1 : tile_first.back();
      const bool joins = tf >= 0 && t1 - tf < tile_tokens &&
                         batch.seq_index.data[t1] == batch.seq_index.data[tf] && first_of(t1) == first_of(tf);
      if (!joins) {
        if (tf >= 0) items += tile_splits * n_kv;
        tile_first.push_back(t1);
        tile_item.push_back(items);
        tile_splits = 0;
      }
      tile_splits = std::max(tile_splits, splits);
      part_start.push_back(parts);
      parts += need;
    }
    items += tile_splits * n_kv;
    tile_first.push_back(t1);
    tile_item.push_back(items);
    if (static_cast<int64_t>(partials.size()) < parts) partials.resize(static_cast<size_t>(parts));
    float* part_base = partials.data();

    // One work item per (tile, KV head, split): the tile's tokens that reach the split, with the
    // group's query heads, share the K/V rows, which are resolved through the block table once
    // per item. A token of one split writes its output; longer ones leave partial states for the
    // combine below.
    // Handed out last item first: later tiles see more positions, so the longest items start
    // first and the pool's dynamic hand-out evens out the tail.
    pool.parallel_for(items, [&](int64_t reversed, int) {
      const int64_t item = items - 1 - reversed;
      const size_t tile = static_cast<size_t>(std::upper_bound(tile_item.begin(), tile_item.end(), item) - tile_item.begin() - 1);
      const int64_t ta = tile_first[tile], tb = tile_first[tile + 1];
      const int64_t splits = (tile_item[tile + 1] - tile_item[tile]) / n_kv;
      const int64_t within = item - tile_item[tile];
      const int32_t kv_head = static_cast<int32_t>(within / splits);
      const int64_t split = within % splits;
      const int64_t first = first_of(ta) + split * kSplit;
      // The tile's tokens with positions in this split, and how many of its positions each sees.
      int64_t tok[simd::kAttendTileTokens], n_tok[simd::kAttendTileTokens];
      int nt = 0;
      int64_t n_positions = 0;
      for (int64_t t = ta; t < tb; ++t) {
        const int64_t n = std::min<int64_t>(kSplit, last_of(t) - first + 1);
        if (n <= 0) continue;
        tok[nt] = t;
        n_tok[nt++] = n;
        n_positions = std::max(n_positions, n);
      }
      if (nt == 0) return;
      const int32_t seq = batch.seq_index.data[ta];
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
      // Per token: its partial state of this (KV head, split), or null (one split: final).
      float* part[simd::kAttendTileTokens];
      for (int i = 0; i < nt; ++i) {
        const int64_t t = tok[i];
        const int64_t ts = splits_of(t);
        part[i] = ts > 1 ? part_base + part_start[static_cast<size_t>(t - t0)] + (static_cast<int64_t>(kv_head) * ts + split) * part_floats
                         : nullptr;
      }
      for (int32_t h0 = 0; h0 < group; h0 += simd::kAttendMaxHeads) {
        const int nq = std::min<int32_t>(group - h0, simd::kAttendMaxHeads);
        const float* q_rows[simd::kAttendTileTokens * simd::kAttendMaxHeads];
        float* out_rows[simd::kAttendTileTokens * simd::kAttendMaxHeads];
        float* part_max[simd::kAttendTileTokens];
        float* part_sum[simd::kAttendTileTokens];
        for (int j = 0; j < nt; ++j) {
          const int64_t t = tok[j];
          part_max[j] = part[j] ? part[j] + static_cast<int64_t>(group) * dv + h0 : nullptr;
          part_sum[j] = part[j] ? part_max[j] + group : nullptr;
          for (int i = 0; i < nq; ++i) {
            const int64_t h = static_cast<int64_t>(kv_head) * group + h0 + i;
            q_rows[j * nq + i] = q.data + t * q.stride + h * dk;
            out_rows[j * nq + i] = part[j] ? part[j] + static_cast<int64_t>(h0 + i) * dv : out.data + t * out.stride + h * dv;
          }
        }
        simd::AttendTile tl;
        tl.q = q_rows;
        tl.nq = nq;
        tl.nt = nt;
        tl.n = n_tok;
        tl.k_rows = k_rows;
        tl.v_rows = v_rows;
        tl.type = kv.type;
        tl.dk = dk;
        tl.dv = dv;
        tl.scale = scale;
        tl.sinks = sinks ? sinks + static_cast<int64_t>(kv_head) * group + h0 : nullptr;
        tl.out = out_rows;
        tl.part_max = part_max;
        tl.part_sum = part_sum;
        // Below ~8 rows the transposition of each K chunk costs more than the tile saves
        // (bench_simd attention/*/g*/t1): tokens go one at a time through the single-query loop.
        if (nt * nq >= kMinTileRows) {
          float* scratch = thread_scratch(Scratch::Attention,
                                          static_cast<size_t>(simd::attend_tile_scratch_floats(nt, nq, dk, dv)));
          if (vectorised) simd::attend_tile(tl, scratch);
          else simd::attend_tile_ref(tl, scratch);
          continue;
        }
        float* scratch = thread_scratch(Scratch::Attention, static_cast<size_t>(simd::attend_scratch_floats(nq, dk, dv)));
        for (int j = 0; j < nt; ++j) {
          const float* const* qj = q_rows + j * nq;
          float* const* oj = out_rows + j * nq;
          if (part_max[j]) {
            if (vectorised) {
              simd::attend_partial(qj, nq, k_rows, v_rows, kv.type, n_tok[j], dk, dv, scale, oj, part_max[j],
                                   part_sum[j], scratch);
            } else {
              simd::attend_partial_ref(qj, nq, k_rows, v_rows, kv.type, n_tok[j], dk, dv, scale, oj, part_max[j],
                                       part_sum[j], scratch);
            }
          } else if (vectorised) {
            simd::attend(qj, nq, k_rows, v_rows, kv.type, n_tok[j], dk, dv, scale, tl.sinks, oj, scratch);
          } else {
            simd::attend_ref(qj, nq, k_rows, v_rows, kv.type, n_tok[j], dk, dv, scale, tl.sinks, oj, scratch);
          }
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
