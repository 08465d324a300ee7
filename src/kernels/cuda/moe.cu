// CUDA mixture-of-experts helpers: top-k routing (softmax or sigmoid gating, selection bias, groups; the per-token rule is
// route_token in kernels/moe_routing.h, the same function the CPU backend runs) and the weighted
// sum of the expert slots (the CPU backend's loop element for element, same order). One token per
// block / thread; they are small next to the expert matmuls (matmul.cu).
#include <cfloat>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/moe_routing.h"

namespace cadenza::kernels::cuda {

namespace {

// One block per token; thread 0 does the (small) sequential work, like the CPU backend.
// Shared memory: route_scratch_floats(E, groups) floats.
__global__ void route_kernel(DevMat logits, RouteRule rule, DevIdx expert_ids,
                             DevMat expert_weights) {
  extern __shared__ float scratch[];
  if (threadIdx.x != 0) return;
  const int64_t t = blockIdx.x;
  route_token(logits.data + t * logits.stride, logits.cols, expert_ids.cols, rule, scratch,
              expert_ids.data + t * expert_ids.cols,
              expert_weights.data + t * expert_weights.stride);
}

__global__ void weighted_sum_kernel(DevMat slot_rows, DevMat weights, DevMat out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= out.rows * out.cols) return;
  const int64_t t = i / out.cols, c = i % out.cols;
  const int64_t k = weights.cols;
  const float* w = weights.data + t * weights.stride;
  float o = 0.0f;
  for (int64_t s = 0; s < k; ++s) {
    const float v = slot_rows.data[(t * k + s) * slot_rows.stride + c];
    o = s == 0 ? w[0] * v : o + w[s] * v;
  }
  out.data[t * out.stride + c] = o;
}

}  // namespace

void route_experts(DevMat logits, const RouteRule& rule, DevIdx expert_ids, DevMat expert_weights,
                   cudaStream_t stream) {
  if (logits.rows == 0) return;
  const size_t smem =
      static_cast<size_t>(route_scratch_floats(logits.cols, rule.n_groups)) * sizeof(float);
  route_kernel<<<static_cast<unsigned>(logits.rows), 32, smem, stream>>>(logits, rule, expert_ids,
                                                                          expert_weights);
}

void weighted_sum_slots(DevMat slot_rows, DevMat weights, DevMat out, cudaStream_t stream) {
  const int64_t n = out.rows * out.cols;
  if (n == 0) return;
  weighted_sum_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(slot_rows, weights,
                                                                                  out);
}

}  // namespace cadenza::kernels::cuda
