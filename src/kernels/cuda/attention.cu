// CUDA paged attention.
//
// kv_write scatters new K/V rows into their slots: f32, f16 (round to nearest even) or Q8_0 (the
// reference quantizer, per block of 32 values of a head row).
//
// attention: a block takes a tile of TQ consecutive tokens of the batch and one group of up to
// 32 query heads that share a KV head (GQA): R = TQ x heads "rows". It walks positions in fixed
// chunks of 32 (0..31, 32..63, ...), stages each chunk's K and V in shared memory once, and
// updates every row with an online softmax. When the tile's tokens belong to different sequences
// the block runs one pass per token instead (each pass stages that token's K/V).
//
// Per (token, head) row the arithmetic is fixed, whatever the tile, the pass or the batch:
//   for each chunk c (positions 32c .. min(32c + 32, pos + 1) - 1, in order):
//     s_j  = (fma chain over d = 0..dk-1 of q[d] * k_j[d], from 0) * scale
//     m    = c == 0 ? max_j s_j : max(m_prev, max_j s_j);  corr = c == 0 ? 0 : exp(m_prev - m)
//     p_j  = exp(s_j - m);  sum = sum * corr + p_0 + p_1 + ... (in order)
//     acc[i] = fma chain over j of p_j * v_j[i], starting from acc[i] * corr
//   out[i] = acc[i] * (1 / sum)
// so the result is batch, tile and block-size invariant (chunks follow positions, not KV blocks).
// A sliding window (window > 0) limits a row to positions lo = max(0, pos - window + 1) .. pos:
// the chunks stay aligned to multiples of 32, positions below lo are masked, and the row's first
// chunk is the one holding lo. Sinks: out[i] = acc[i] * (c / (sum * c + exp(sink - m'))), with
// m' = max(m, sink) and c = exp(m - m'), the CPU backend's formula.
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>

#include "kernels/cuda/cuda_kernels.h"

namespace cadenza::kernels::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kPosChunk = 32;
constexpr int kMaxRows = 32;  // query rows (tokens x heads) per block
constexpr int kAccPerThread = kMaxRows * kMaxAttentionHeadDim / kThreads;

// Element idx of a K or V store (idx = (slot * n_kv_heads + head) * head_dim + d).
__device__ __forceinline__ float kv_load(const void* base, KvType type, int64_t idx) {
  switch (type) {
    case KvType::F16:
      return __half2float(static_cast<const __half*>(base)[idx]);
    case KvType::Q8_0: {
      const uint8_t* block = static_cast<const uint8_t*>(base) + (idx / 32) * 34;
      const float d = __half2float(__ushort_as_half(static_cast<uint16_t>(block[0] | (block[1] << 8))));
      return d * static_cast<float>(static_cast<int8_t>(block[2 + idx % 32]));
    }
    default:
      return static_cast<const float*>(base)[idx];
  }
}

__global__ void kv_write_kernel(DevKv kv, DevMat k, DevMat v, DevIdx slots) {
  const int64_t k_row = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim_k;
  const int64_t v_row = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim_v;
  const int64_t width = k_row + v_row;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= k.rows * width) return;
  const int64_t t = i / width, c = i % width;
  const int64_t slot = slots.data[t * slots.cols];
  const bool is_k = c < k_row;
  const float value = is_k ? k.data[t * k.stride + c] : v.data[t * v.stride + (c - k_row)];
  const int64_t dst = is_k ? slot * k_row + c : slot * v_row + (c - k_row);
  void* base = is_k ? kv.keys : kv.values;
  if (kv.type == KvType::F16) {
    static_cast<__half*>(base)[dst] = __float2half_rn(value);
  } else {
    static_cast<float*>(base)[dst] = value;
  }
}

// Q8_0: one thread per block of 32 values, the reference quantizer's arithmetic
// (d = amax / 127 stored as fp16; q = clamp(round(x / d), -127, 127) with id = 1 / d in f32).
__global__ void kv_write_q8_kernel(DevKv kv, DevMat k, DevMat v, DevIdx slots) {
  const int64_t k_blocks = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim_k / 32;
  const int64_t v_blocks = static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim_v / 32;
  const int64_t width = k_blocks + v_blocks;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= k.rows * width) return;
  const int64_t t = i / width, b = i % width;
  const int64_t slot = slots.data[t * slots.cols];
  const bool is_k = b < k_blocks;
  const float* x = is_k ? k.data + t * k.stride + b * 32 : v.data + t * v.stride + (b - k_blocks) * 32;
  uint8_t* dst = static_cast<uint8_t*>(is_k ? kv.keys : kv.values) +
                 (is_k ? slot * k_blocks + b : slot * v_blocks + (b - k_blocks)) * 34;
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = __half_as_ushort(__float2half_rn(d));
  dst[0] = static_cast<uint8_t>(dh & 0xFF);
  dst[1] = static_cast<uint8_t>(dh >> 8);
  for (int j = 0; j < 32; ++j) {
    const float q = x[j] * id;
    const float r = isnan(q) ? 0.0f : fminf(fmaxf(roundf(q), -127.0f), 127.0f);
    dst[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(r));
  }
}

struct AttnArgs {
  DevMat q, out;
  DevKv kv;
  DevIdx positions, seq_index, block_tables;
  int32_t n_heads, group, heads_per_block, tile_tokens;
  float scale;
  const float* sinks;  // [n_heads] or null
  int32_t window;      // 0: all positions
  int32_t chunk;       // 0: no chunks
};

// The first position row token t attends to.
__device__ __forceinline__ int64_t first_position(const AttnArgs& a, int64_t t) {
  const int64_t pos = a.positions.data[t * a.positions.cols];
  const int64_t lo = a.window > 0 ? max(static_cast<int64_t>(0), pos - a.window + 1) : 0;
  return a.chunk > 0 ? max(lo, pos - pos % a.chunk) : lo;
}

// Shared memory layout (floats): q [R][dk], k [32][dk + 1], v [32][dv], p [R][32],
// row_max [R], row_sum [R], row_corr [R]; then slots [32] (int64).
__host__ __device__ inline size_t attn_smem_floats(int rows, int dk, int dv) {
  return static_cast<size_t>(rows) * dk + static_cast<size_t>(kPosChunk) * (dk + 1) +
         static_cast<size_t>(kPosChunk) * dv + static_cast<size_t>(rows) * kPosChunk + 3u * rows;
}

__global__ void __launch_bounds__(kThreads) attention_kernel(AttnArgs a) {
  extern __shared__ __align__(16) float smem[];
  const int dk = a.kv.head_dim_k, dv = a.kv.head_dim_v, n_kv = a.kv.n_kv_heads;
  const int hpb = a.heads_per_block;
  const int head_groups = (a.group + hpb - 1) / hpb;
  const int kv_head = static_cast<int>(blockIdx.y) / head_groups;
  const int h_first = kv_head * a.group + (static_cast<int>(blockIdx.y) % head_groups) * hpb;
  const int n_h = min(hpb, kv_head * a.group + a.group - h_first);
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * a.tile_tokens;
  const int n_tok = static_cast<int>(min(static_cast<int64_t>(a.tile_tokens), a.q.rows - t0));
  const int tid = static_cast<int>(threadIdx.x);
  const int rows_max = a.tile_tokens * hpb;

  float* q_s = smem;
  float* k_s = q_s + static_cast<size_t>(rows_max) * dk;
  float* v_s = k_s + static_cast<size_t>(kPosChunk) * (dk + 1);
  float* p_s = v_s + static_cast<size_t>(kPosChunk) * dv;
  float* row_max = p_s + static_cast<size_t>(rows_max) * kPosChunk;
  float* row_sum = row_max + rows_max;
  float* row_corr = row_sum + rows_max;
  __shared__ int64_t slot_s[kPosChunk];
  __shared__ int uniform_s;

  if (tid == 0) {
    int same = 1;
    const int32_t s0 = a.seq_index.data[t0 * a.seq_index.cols];
    for (int u = 1; u < n_tok; ++u) same &= a.seq_index.data[(t0 + u) * a.seq_index.cols] == s0;
    uniform_s = same;
  }
  __syncthreads();
  const bool uniform = uniform_s != 0;

  // One pass per token when the tile mixes sequences, else one pass for all.
  for (int pass_tok = 0; pass_tok < (uniform ? 1 : n_tok); ++pass_tok) {
    const int u_begin = uniform ? 0 : pass_tok;
    const int u_count = uniform ? n_tok : 1;
    const int rows = u_count * n_h;  // row r: token u_begin + r / n_h, head h_first + r % n_h
    const int64_t seq = a.seq_index.data[(t0 + u_begin) * a.seq_index.cols];
    const int32_t* table = a.block_tables.data + seq * a.block_tables.cols;
    int64_t max_pos = 0, min_first = INT64_MAX;
    for (int u = 0; u < u_count; ++u) {
      max_pos = max(max_pos, static_cast<int64_t>(a.positions.data[(t0 + u_begin + u) * a.positions.cols]) + 1);
      min_first = min(min_first, first_position(a, t0 + u_begin + u));
    }
    // Queries into shared memory.
    for (int e = tid; e < rows * dk; e += kThreads) {
      const int r = e / dk, d = e % dk;
      const int64_t t = t0 + u_begin + r / n_h;
      q_s[e] = a.q.data[t * a.q.stride + static_cast<int64_t>(h_first + r % n_h) * dk + d];
    }
    float acc[kAccPerThread];
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i) acc[i] = 0.0f;

    for (int64_t start = min_first / kPosChunk * kPosChunk; start < max_pos; start += kPosChunk) {
      const int chunk = static_cast<int>(min(static_cast<int64_t>(kPosChunk), max_pos - start));
      if (tid < chunk) {
        const int64_t p = start + tid;
        slot_s[tid] = static_cast<int64_t>(table[p / a.kv.block_size]) * a.kv.block_size + p % a.kv.block_size;
      }
      __syncthreads();
      for (int e = tid; e < chunk * dk; e += kThreads) {
        const int j = e / dk, d = e % dk;
        k_s[j * (dk + 1) + d] = kv_load(a.kv.keys, a.kv.type, (slot_s[j] * n_kv + kv_head) * dk + d);
      }
      for (int e = tid; e < chunk * dv; e += kThreads) {
        const int j = e / dv, d = e % dv;
        v_s[j * dv + d] = kv_load(a.kv.values, a.kv.type, (slot_s[j] * n_kv + kv_head) * dv + d);
      }
      __syncthreads();
      // Scores of (row, position) pairs.
      for (int e = tid; e < rows * kPosChunk; e += kThreads) {
        const int r = e / kPosChunk, j = e % kPosChunk;
        const int64_t t = t0 + u_begin + r / n_h;
        const int64_t n_pos = static_cast<int64_t>(a.positions.data[t * a.positions.cols]) + 1;
        if (start + j < n_pos && start + j >= first_position(a, t)) {
          const float* qr = q_s + r * dk;
          const float* kr = k_s + j * (dk + 1);
          float s = 0.0f;
          for (int d = 0; d < dk; ++d) s = __fmaf_rn(qr[d], kr[d], s);
          p_s[r * kPosChunk + j] = s * a.scale;
        }
      }
      __syncthreads();
      // Softmax statistics: one thread per row, positions in order.
      if (tid < rows) {
        const int r = tid;
        const int64_t t = t0 + u_begin + r / n_h;
        const int64_t n_pos = static_cast<int64_t>(a.positions.data[t * a.positions.cols]) + 1;
        const int64_t lo = first_position(a, t);
        const int j0 = static_cast<int>(max(static_cast<int64_t>(0), lo - start));
        const int count = static_cast<int>(max(static_cast<int64_t>(0), min(static_cast<int64_t>(kPosChunk), n_pos - start)));
        if (count > j0) {
          float* pr = p_s + r * kPosChunk;
          float chunk_max = pr[j0];
          for (int j = j0 + 1; j < count; ++j) chunk_max = fmaxf(chunk_max, pr[j]);
          const bool first = start <= lo;  // the row's first chunk (start == 0 without a window)
          const float new_max = first ? chunk_max : fmaxf(row_max[r], chunk_max);
          const float corr = first ? 0.0f : expf(row_max[r] - new_max);
          float sum = first ? 0.0f : row_sum[r] * corr;
          for (int j = j0; j < count; ++j) {
            const float p = expf(pr[j] - new_max);
            pr[j] = p;
            sum += p;
          }
          row_max[r] = new_max;
          row_sum[r] = sum;
          row_corr[r] = corr;
        }
      }
      __syncthreads();
      // Weighted values: element e = (row, dim) of the accumulators.
#pragma unroll
      for (int i = 0; i < kAccPerThread; ++i) {
        const int e = tid + i * kThreads;
        if (e < rows * dv) {
          const int r = e / dv, d = e % dv;
          const int64_t t = t0 + u_begin + r / n_h;
          const int64_t n_pos = static_cast<int64_t>(a.positions.data[t * a.positions.cols]) + 1;
          const int j0 = static_cast<int>(max(static_cast<int64_t>(0), first_position(a, t) - start));
          const int count = static_cast<int>(max(static_cast<int64_t>(0), min(static_cast<int64_t>(kPosChunk), n_pos - start)));
          if (count > j0) {
            const float* pr = p_s + r * kPosChunk;
            float v = acc[i] * row_corr[r];
            for (int j = j0; j < count; ++j) v = __fmaf_rn(pr[j], v_s[j * dv + d], v);
            acc[i] = v;
          }
        }
      }
      __syncthreads();  // k_s, v_s, p_s, slot_s are rewritten by the next chunk
    }
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i) {
      const int e = tid + i * kThreads;
      if (e < rows * dv) {
        const int r = e / dv, d = e % dv;
        const int64_t t = t0 + u_begin + r / n_h;
        float f;
        if (a.sinks) {
          const float sink = a.sinks[h_first + r % n_h];
          const float m = fmaxf(row_max[r], sink);
          const float c = expf(row_max[r] - m);
          f = c / (row_sum[r] * c + expf(sink - m));
        } else {
          f = 1.0f / row_sum[r];
        }
        a.out.data[t * a.out.stride + static_cast<int64_t>(h_first + r % n_h) * dv + d] = acc[i] * f;
      }
    }
    __syncthreads();  // q_s and the row statistics are rewritten by the next pass
  }
}

}  // namespace

void kv_write(const DevKv& kv, DevMat k, DevMat v, DevIdx slots, cudaStream_t stream) {
  if (kv.type == KvType::Q8_0) {
    const int64_t n = k.rows * kv.n_kv_heads * ((kv.head_dim_k + kv.head_dim_v) / 32);
    if (n == 0) return;
    kv_write_q8_kernel<<<static_cast<unsigned>((n + 127) / 128), 128, 0, stream>>>(kv, k, v, slots);
    return;
  }
  const int64_t width = static_cast<int64_t>(kv.n_kv_heads) * (kv.head_dim_k + kv.head_dim_v);
  const int64_t n = k.rows * width;
  if (n == 0) return;
  kv_write_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(kv, k, v, slots);
}

void attention(DevMat q, const DevKv& kv, DevIdx positions, DevIdx seq_index, DevIdx block_tables,
               int32_t n_heads, float scale, const float* sinks, int32_t window, int32_t chunk,
               DevMat out, cudaStream_t stream) {
  if (q.rows == 0) return;
  AttnArgs a;
  a.q = q;
  a.out = out;
  a.kv = kv;
  a.positions = positions;
  a.seq_index = seq_index;
  a.block_tables = block_tables;
  a.n_heads = n_heads;
  a.group = n_heads / kv.n_kv_heads;
  a.heads_per_block = std::min(a.group, kMaxRows);
  // Tiles of several tokens pay off when tokens share a sequence (prefill); a decode batch of
  // single tokens from many sequences gets one token per block. The results are the same bits.
  a.tile_tokens = q.rows >= 64 ? std::max(1, kMaxRows / a.heads_per_block) : 1;
  a.scale = scale;
  a.sinks = sinks;
  a.window = window;
  a.chunk = chunk;
  const int rows_max = a.tile_tokens * a.heads_per_block;
  const size_t smem = attn_smem_floats(rows_max, kv.head_dim_k, kv.head_dim_v) * sizeof(float);
  static size_t raised = 48 * 1024;
  if (smem > raised) {
    cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
    raised = smem;
  }
  const int head_groups = (a.group + a.heads_per_block - 1) / a.heads_per_block;
  const dim3 grid(static_cast<unsigned>((q.rows + a.tile_tokens - 1) / a.tile_tokens),
                  static_cast<unsigned>(kv.n_kv_heads * head_groups));
  attention_kernel<<<grid, kThreads, smem, stream>>>(a);
}

}  // namespace cadenza::kernels::cuda
