// CUDA row-wise ops: row lookups, bias, expert biases, RMS norm, elementwise add/mul, SwiGLU
// (plain and gpt-oss's clamped one), GeGLU, scaling, soft-capping, RoPE.
// Each output element is computed from its own row only, with the CPU backend's formulas; RMS
// norm reduces each row with a fixed tree in double (independent of the number of rows).
#include "kernels/cuda/matmul_common.cuh"

namespace cadenza::kernels::cuda {

namespace {

unsigned blocks_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

__global__ void get_rows_kernel(DevWeight table, DevIdx ids, DevMat out) {
  const int64_t groups = (table.cols + 7) / 8;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= groups * ids.rows) return;
  const int64_t t = g / groups, k0 = (g % groups) * 8;
  float v[8];
  decode8(table, 0, ids.data[t * ids.cols], k0, v);
  const int cnt = static_cast<int>(min(static_cast<int64_t>(8), table.cols - k0));
  for (int i = 0; i < cnt; ++i) out.data[t * out.stride + k0 + i] = v[i];
}

__global__ void gather_rows_kernel(DevMat src, DevIdx rows, DevMat out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= out.rows * out.cols) return;
  const int64_t r = i / out.cols, c = i % out.cols;
  out.data[r * out.stride + c] = src.data[static_cast<int64_t>(rows.data[r * rows.cols]) * src.stride + c];
}

// op: 0 add, 1 mul, 2 swiglu, 3 add bias (b is a vector: row stride 0), 4 sigmoid (b unused).
__global__ void elementwise_kernel(DevMat a, DevMat b, DevMat out, int op) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= out.rows * out.cols) return;
  const int64_t r = i / out.cols, c = i % out.cols;
  const float x = a.data[r * a.stride + c];
  const float y = op == 4 ? 0.0f : b.data[r * b.stride + c];
  float v;
  switch (op) {
    case 0: v = x + y; break;
    case 1: v = x * y; break;
    case 2: v = x / (1.0f + expf(-x)) * y; break;
    case 4: v = 1.0f / (1.0f + expf(-x)); break;
    default: v = x + y; break;
  }
  out.data[r * out.stride + c] = v;
}

constexpr int kNormThreads = 256;

__global__ void __launch_bounds__(kNormThreads)
rms_norm_kernel(DevMat x, const float* weight, float eps, DevMat out) {
  __shared__ double partial[kNormThreads];
  const int64_t r = blockIdx.x;
  const float* xr = x.data + r * x.stride;
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < x.cols; i += kNormThreads) {
    sum += static_cast<double>(xr[i]) * static_cast<double>(xr[i]);
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = kNormThreads / 2; s > 0; s /= 2) {  // fixed tree
    if (static_cast<int>(threadIdx.x) < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float mean = static_cast<float>(partial[0] / static_cast<double>(x.cols));
  const float scale = 1.0f / sqrtf(mean + eps);
  float* o = out.data + r * out.stride;
  for (int64_t i = threadIdx.x; i < x.cols; i += kNormThreads) o[i] = (xr[i] * scale) * weight[i];
}

__global__ void rope_kernel(DevMat x, int32_t n_heads, int32_t head_dim, DevIdx positions,
                            RopeFrequency freq, bool neox, float attn_factor,
                            const float* freq_factors) {
  const int32_t half = freq.n_dims / 2;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= x.rows * n_heads * half) return;
  const int32_t pair = static_cast<int32_t>(i % half);
  const int64_t h = (i / half) % n_heads;
  const int64_t r = i / (static_cast<int64_t>(half) * n_heads);
  const double f =
      rope_inv_freq(freq, pair, freq_factors ? static_cast<double>(freq_factors[pair]) : 1.0);
  const double theta = static_cast<double>(positions.data[r * positions.cols]) * f;
  const float c = static_cast<float>(cos(theta) * attn_factor);
  const float s = static_cast<float>(sin(theta) * attn_factor);
  float* head = x.data + r * x.stride + h * head_dim;
  const int32_t i0 = neox ? pair : 2 * pair;
  const int32_t i1 = neox ? pair + half : 2 * pair + 1;
  const float a = head[i0], b = head[i1];
  head[i0] = a * c - b * s;
  head[i1] = a * s + b * c;
}

__global__ void copy_matrix_kernel(DevMat src, DevMat out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= out.rows * out.cols) return;
  const int64_t r = i / out.cols, c = i % out.cols;
  out.data[r * out.stride + c] = src.data[r * src.stride + c];
}

__global__ void swiglu_clamped_kernel(DevMat gate, DevMat up, float alpha, float limit, DevMat out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= out.rows * out.cols) return;
  const int64_t r = i / out.cols, c = i % out.cols;
  const float x = fminf(gate.data[r * gate.stride + c], limit);
  const float y = fminf(fmaxf(up.data[r * up.stride + c], -limit), limit);
  out.data[r * out.stride + c] = (y + 1.0f) * (x / (1.0f + expf(-alpha * x)));
}

// op: 0 scale (out = a * p), 1 softcap (out = p * tanh(a / p)), 2 geglu (gelu_tanh(a) * b).
__global__ void unary_kernel(DevMat a, DevMat b, DevMat out, float p, int op) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= out.rows * out.cols) return;
  const int64_t r = i / out.cols, c = i % out.cols;
  const float x = a.data[r * a.stride + c];
  float v;
  switch (op) {
    case 0: v = x * p; break;
    case 1: v = p * tanhf(x / p); break;
    default: {
      const float t = tanhf(0.79788456080286535588f * x * (1.0f + 0.044715f * x * x));
      const float gelu = 0.5f * x * (1.0f + t);
      v = gelu * b.data[r * b.stride + c];
      break;
    }
  }
  out.data[r * out.stride + c] = v;
}

__global__ void scale_by_position_kernel(DevMat x, DevIdx positions, float beta, int32_t length,
                                         int32_t offset, DevMat out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= out.rows * out.cols) return;
  const int64_t r = i / out.cols, c = i % out.cols;
  const int64_t p = static_cast<int64_t>(positions.data[r * positions.cols]) + offset;
  const float s = 1.0f + beta * logf(1.0f + static_cast<float>(p / length));
  out.data[r * out.stride + c] = x.data[r * x.stride + c] * s;
}

void unary(DevMat a, DevMat b, DevMat out, float p, int op, cudaStream_t stream) {
  const int64_t n = out.rows * out.cols;
  if (n == 0) return;
  unary_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(a, b, out, p, op);
}

// One thread per group of 8 elements of a (token, slot) row; the expert's bias row decoded with
// decode8 (any stored type).
__global__ void add_expert_bias_kernel(DevMat y, DevWeight bias, DevIdx ids) {
  const int64_t groups = (y.cols + 7) / 8;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= groups * y.rows) return;
  const int64_t r = g / groups, k0 = (g % groups) * 8;
  const int32_t e = ids.data[r];  // row t*K + s is element (t, s) of the contiguous ids
  if (e < 0) return;
  float v[8];
  decode8(bias, 0, e, k0, v);
  const int cnt = static_cast<int>(min(static_cast<int64_t>(8), y.cols - k0));
  float* o = y.data + r * y.stride + k0;
  for (int i = 0; i < cnt; ++i) o[i] += v[i];
}

void elementwise(DevMat a, DevMat b, DevMat out, int op, cudaStream_t stream) {
  const int64_t n = out.rows * out.cols;
  if (n == 0) return;
  elementwise_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(a, b, out, op);
}

}  // namespace

void get_rows(const DevWeight& table, DevIdx ids, DevMat out, cudaStream_t stream) {
  const int64_t n = (table.cols + 7) / 8 * ids.rows;
  if (n == 0) return;
  get_rows_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(table, ids, out);
}

void gather_rows(DevMat src, DevIdx rows, DevMat out, cudaStream_t stream) {
  const int64_t n = out.rows * out.cols;
  if (n == 0) return;
  gather_rows_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(src, rows, out);
}

void add_bias(DevMat x, const float* bias, DevMat out, cudaStream_t stream) {
  elementwise(x, DevMat{const_cast<float*>(bias), x.rows, x.cols, 0}, out, 3, stream);
}

void rms_norm(DevMat x, const float* weight, float eps, DevMat out, cudaStream_t stream) {
  if (x.rows == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(x.rows), kNormThreads, 0, stream>>>(x, weight, eps, out);
}

void add(DevMat a, DevMat b, DevMat out, cudaStream_t stream) { elementwise(a, b, out, 0, stream); }
void mul(DevMat a, DevMat b, DevMat out, cudaStream_t stream) { elementwise(a, b, out, 1, stream); }
void swiglu(DevMat gate, DevMat up, DevMat out, cudaStream_t stream) {
  elementwise(gate, up, out, 2, stream);
}

void sigmoid(DevMat x, DevMat out, cudaStream_t stream) { elementwise(x, x, out, 4, stream); }

void swiglu_clamped(DevMat gate, DevMat up, float alpha, float limit, DevMat out,
                    cudaStream_t stream) {
  const int64_t n = out.rows * out.cols;
  if (n == 0) return;
  swiglu_clamped_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(gate, up, alpha, limit, out);
}

void scale(DevMat x, float s, DevMat out, cudaStream_t stream) { unary(x, x, out, s, 0, stream); }
void softcap(DevMat x, float cap, DevMat out, cudaStream_t stream) {
  unary(x, x, out, cap, 1, stream);
}
void geglu(DevMat gate, DevMat up, DevMat out, cudaStream_t stream) {
  unary(gate, up, out, 0.0f, 2, stream);
}

void scale_by_position(DevMat x, DevIdx positions, float beta, int32_t length, int32_t offset,
                       DevMat out, cudaStream_t stream) {
  const int64_t n = out.rows * out.cols;
  if (n == 0) return;
  scale_by_position_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, positions, beta, length,
                                                                    offset, out);
}

void add_expert_bias(DevMat y, const DevWeight& bias, DevIdx expert_ids, cudaStream_t stream) {
  const int64_t n = (y.cols + 7) / 8 * y.rows;
  if (n == 0) return;
  add_expert_bias_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(y, bias, expert_ids);
}

void rope(DevMat x, int32_t n_heads, int32_t head_dim, DevIdx positions,
          const RopeFrequency& freq, bool neox, float attn_factor, const float* freq_factors,
          cudaStream_t stream) {
  const int64_t n = x.rows * n_heads * (freq.n_dims / 2);
  if (n == 0) return;
  rope_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, n_heads, head_dim, positions, freq, neox,
                                                       attn_factor, freq_factors);
}

void copy_matrix(DevMat src, DevMat out, cudaStream_t stream) {
  const int64_t n = out.rows * out.cols;
  if (n == 0) return;
  copy_matrix_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(src, out);
}

}  // namespace cadenza::kernels::cuda
