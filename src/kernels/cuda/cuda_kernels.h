// Internal to the CUDA backend: the host-callable launchers of the kernels in *.cu, with a
// plain-struct interface (no project headers) so that nvcc compiles only this folder's code.
//
// Every pointer here is device memory unless a comment says otherwise. Launchers enqueue work on
// `stream` and return at once; they do not check arguments beyond debug asserts (the backend
// checks shapes before calling). Launch errors are picked up by the backend (cudaGetLastError).
//
// Numerics shared by every matmul kernel (the batch-invariance contract, see README.md):
//   with w[j][k] decoded to f32 exactly as decode8() in matmul_common.cuh does and x in f32,
//   lane l (0..31) computes p_l = fma chain, from 0.0f, over the groups g = l, l+32, l+64, ... of
//   8 elements (k = 8g .. 8g+7, those < K), groups and elements in ascending order;
//   y[t][j] = the xor butterfly sum of p_0..p_31 (offsets 16, 8, 4, 2, 1).
// The GEMV (few rows) and GEMM (many rows) kernels both compute exactly this, so a row's result
// does not depend on how many rows the call has or which kernel ran.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/moe_routing.h"
#include "kernels/rope_frequency.h"

namespace cadenza::kernels::cuda {

// Storage types of weights in device memory.
enum class WType : int32_t {
  F32 = 0,
  F16 = 1,
  BF16 = 2,
  Q8_0 = 3,  // split: int8 quants data[row][k] and fp16 scales scales[row][k/32]
  Q4_K = 4,  // GGUF blocks as in the file (144 bytes per 256 elements)
  // GGUF blocks as in the file (tensor/blocks.h), decoded byte by byte (no alignment assumed):
  Q2_K = 5,    // 84 bytes per 256 elements
  Q3_K = 6,    // 110 bytes per 256
  IQ4_XS = 7,  // 136 bytes per 256
  MXFP4 = 8,   // 17 bytes per 32
};

// A weight tensor of `matrices` matrices of rows x cols in device memory.
// Matrix e, row r: data + e * matrix_bytes + r * row_bytes (Q8_0: quants, row_bytes == cols);
// Q8_0 scales of matrix e, row r: scales + (e * rows + r) * (cols / 32) fp16 values.
struct DevWeight {
  WType type = WType::F32;
  const void* data = nullptr;
  const void* scales = nullptr;  // Q8_0 only
  int64_t rows = 0, cols = 0, matrices = 1;
  size_t row_bytes = 0, matrix_bytes = 0;
};

// Row-major f32 matrix view: element (r, c) at data[r * stride + c].
struct DevMat {
  float* data = nullptr;
  int64_t rows = 0, cols = 0, stride = 0;
};

// Row-major int32 matrix (contiguous).
struct DevIdx {
  int32_t* data = nullptr;
  int64_t rows = 0, cols = 0;
};

// KV element types: f32, f16 (round to nearest even), Q8_0 (head rows of n values are n/32 GGUF
// blocks of 34 bytes, quantized like tensor/quant.h's reference quantizer).
enum class KvType : int32_t { F32 = 0, F16 = 1, Q8_0 = 2 };

// The paged KV store of one layer (see kernels/backend.h KvLayer).
struct DevKv {
  void* keys = nullptr;
  void* values = nullptr;
  KvType type = KvType::F32;
  int32_t num_blocks = 0, block_size = 0, n_kv_heads = 0, head_dim_k = 0, head_dim_v = 0;
};

// --- ops.cu ---
void get_rows(const DevWeight& table, DevIdx ids, DevMat out, cudaStream_t stream);
void gather_rows(DevMat src, DevIdx rows, DevMat out, cudaStream_t stream);
void copy_matrix(DevMat src, DevMat out, cudaStream_t stream);
void add_bias(DevMat x, const float* bias, DevMat out, cudaStream_t stream);
// CPU-equivalent: sum of squares in double, scale = 1 / sqrtf(mean + eps), out = (x * scale) * w.
void rms_norm(DevMat x, const float* weight, float eps, DevMat out, cudaStream_t stream);
void add(DevMat a, DevMat b, DevMat out, cudaStream_t stream);
void mul(DevMat a, DevMat b, DevMat out, cudaStream_t stream);
void swiglu(DevMat gate, DevMat up, DevMat out, cudaStream_t stream);
void sigmoid(DevMat x, DevMat out, cudaStream_t stream);
// The CPU backend's formula: g = fminf(gate, limit), u = clamp(up), (u + 1) * g / (1 + expf(-alpha g)).
void swiglu_clamped(DevMat gate, DevMat up, float alpha, float limit, DevMat out,
                    cudaStream_t stream);
// The CPU backend's formulas: out = s * x; cap * tanhf(x / cap); gelu_tanh(gate) * up;
// x * (1 + beta * logf(1 + floor(position / length))) per row.
void scale(DevMat x, float s, DevMat out, cudaStream_t stream);
void softcap(DevMat x, float cap, DevMat out, cudaStream_t stream);
void geglu(DevMat gate, DevMat up, DevMat out, cudaStream_t stream);
void scale_by_position(DevMat x, DevIdx positions, float beta, int32_t length, int32_t offset,
                       DevMat out, cudaStream_t stream);
// y[t*K + s] += row expert_ids[t][s] of matrix 0 of bias (decoded like get_rows); -1: skipped.
void add_expert_bias(DevMat y, const DevWeight& bias, DevIdx expert_ids, cudaStream_t stream);
// freq_factors: n_dims/2 f32 values or nullptr. Angles in double as the CPU backend computes them
// (kernels/rope_frequency.h); the rotated pair times attn_factor.
void rope(DevMat x, int32_t n_heads, int32_t head_dim, DevIdx positions,
          const RopeFrequency& freq, bool neox, float attn_factor, const float* freq_factors,
          cudaStream_t stream);

// --- matmul.cu ---
// y = x * w^T for matrix 0 of w (invariant kernels; see the contract above).
void matmul_invariant(const DevWeight& w, DevMat x, DevMat y, cudaStream_t stream);
// Rows [r0, r0 + n_rows) of matrix `matrix` of w decoded to bf16 (out: n_rows x w.cols,
// contiguous) or to f16 when `to_f16`. For the cuBLAS path.
void dequantize_rows(const DevWeight& w, int64_t matrix, int64_t r0, int64_t n_rows, void* out,
                     bool to_f16, cudaStream_t stream);
// x (f32) to a contiguous [rows][cols] bf16 (or f16) copy. For the cuBLAS path.
void convert_activations(DevMat x, void* out, bool to_f16, cudaStream_t stream);

// Per (token, slot) expert matmul with the matmul numerics above (a warp per output row and
// pair; each pair reads its expert's matrix). ids: [n][K]; x: [n][k] or [n*K][k]; y: [n*K][m].
void matmul_experts(const DevWeight& w, DevMat x, DevIdx expert_ids, DevMat y, cudaStream_t stream);

// --- moe.cu ---
// rule.bias: device memory (E floats) or null.
void route_experts(DevMat logits, const RouteRule& rule, DevIdx expert_ids, DevMat expert_weights,
                   cudaStream_t stream);
void weighted_sum_slots(DevMat slot_rows, DevMat weights, DevMat out, cudaStream_t stream);

// --- attention.cu ---
constexpr int kMaxAttentionHeadDim = 256;  // head_dim_k and head_dim_v limit of attention()
void kv_write(const DevKv& kv, DevMat k, DevMat v, DevIdx slots, cudaStream_t stream);
// Online softmax over fixed chunks of 32 positions (independent of block size and batch); tiles
// of tokens of one sequence share each K/V chunk through shared memory. See attention.cu.
// sinks: n_heads f32 logits (device) or null; window > 0: the last `window` positions only.
void attention(DevMat q, const DevKv& kv, DevIdx positions, DevIdx seq_index, DevIdx block_tables,
               int32_t n_heads, float scale, const float* sinks, int32_t window, int32_t chunk,
               DevMat out, cudaStream_t stream);

}  // namespace cadenza::kernels::cuda
