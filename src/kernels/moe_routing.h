// Top-k expert routing of one token: the one definition that the CPU backend (cpu/ops.cpp) and the
// CUDA kernel (cuda/moe.cu) both run, so that they choose the same experts in the same order, ties
// included (RoutingParams in backend.h states the rule).
//
// Plain C++ with no project or library headers: nvcc compiles it as a __host__ __device__ function.
// Given the same probabilities the choice is identical on both sides; expf itself may differ by an
// ulp between the host's libm and CUDA's device expf, so a near-tie can still resolve differently.
#pragma once

#include <math.h>  // expf: the function std::exp(float) calls on the host, a builtin on the device

#include <cstdint>

#if defined(__CUDACC__)
#define CADENZA_HOST_DEVICE __host__ __device__
#else
#define CADENZA_HOST_DEVICE
#endif

namespace cadenza::kernels {

// Softmax gating, then the k largest probabilities, largest first; a tie keeps the lower expert id
// first (strict '>' while scanning ids upwards). Optionally the k weights are renormalised to sum to
// 1, then multiplied by `scale`.
//   logits: [n_experts] router logits of the token
//   probs:  [n_experts] scratch (overwritten with the softmax)
//   ids:    [k] chosen experts, weights: [k] their weights; 1 <= k <= n_experts
CADENZA_HOST_DEVICE inline void route_token(const float* logits, int64_t n_experts, int64_t k,
                                            bool normalize_top_k, float scale, float* probs,
                                            int32_t* ids, float* weights) {
  float max_logit = logits[0];
  for (int64_t e = 1; e < n_experts; ++e) max_logit = max_logit < logits[e] ? logits[e] : max_logit;
  float sum = 0.0f;
  for (int64_t e = 0; e < n_experts; ++e) {
    probs[e] = expf(logits[e] - max_logit);
    sum += probs[e];
  }
  for (int64_t e = 0; e < n_experts; ++e) probs[e] /= sum;
  // Selection by repeated scans (k is small).
  for (int64_t s = 0; s < k; ++s) {
    int64_t best = -1;
    for (int64_t e = 0; e < n_experts; ++e) {
      bool taken = false;
      for (int64_t p = 0; p < s; ++p) taken = taken || ids[p] == e;
      if (!taken && (best < 0 || probs[e] > probs[best])) best = e;
    }
    ids[s] = static_cast<int32_t>(best);
    weights[s] = probs[best];
  }
  if (normalize_top_k) {
    float total = 0.0f;
    for (int64_t s = 0; s < k; ++s) total += weights[s];
    for (int64_t s = 0; s < k; ++s) weights[s] /= total;
  }
  if (scale != 1.0f) {
    for (int64_t s = 0; s < k; ++s) weights[s] *= scale;
  }
}

}  // namespace cadenza::kernels
