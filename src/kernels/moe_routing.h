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

// The rule, in plain values (RoutingParams without the Weight handle).
struct RouteRule {
  bool sigmoid = false;           // gating: sigmoid per expert, else softmax over the experts
  bool softmax_top_k = false;     // gating: none for the choice; softmax over the k chosen logits
  const float* bias = nullptr;    // [n_experts] added to the scores for selection only, or null
  int64_t n_groups = 1;           // experts split into this many equal groups
  int64_t n_groups_used = 1;      // only experts of the best groups may be chosen
  bool normalize_top_k = true;    // the k weights renormalised to sum to 1
  float scale = 1.0f;             // then multiplied by this
};

// Floats of scratch route_token needs for n_experts experts in n_groups groups.
CADENZA_HOST_DEVICE inline int64_t route_scratch_floats(int64_t n_experts, int64_t n_groups) {
  return 2 * n_experts + n_groups;
}

// 1. scores = softmax(logits) or sigmoid(logits), or the logits themselves (softmax_top_k);
//    choice = scores + bias (bias absent: scores).
// 2. With groups (n_groups > 1): a group's score is the sum of its two largest choice values
//    (DeepSeek-V3's rule; the largest alone when a group has one expert); the n_groups_used best
//    groups stay eligible (ties: lower group id), the others' experts are excluded.
// 3. The k eligible experts of largest choice, largest first; a tie keeps the lower expert id
//    first (strict '>' while scanning ids upwards).
// 4. Their weights are their scores (without the bias); with softmax_top_k the softmax of the k
//    chosen logits (exp(l_s - max) over their sum, summed in rank order). Optionally
//    renormalised to sum to 1, then multiplied by `scale`.
//   logits: [n_experts] router logits of the token
//   scratch: route_scratch_floats(n_experts, n_groups) floats (overwritten)
//   ids: [k] chosen experts, weights: [k] their weights; 1 <= k <= eligible experts
CADENZA_HOST_DEVICE inline void route_token(const float* logits, int64_t n_experts, int64_t k,
                                            const RouteRule& rule, float* scratch, int32_t* ids,
                                            float* weights) {
  float* scores = scratch;
  float* choice = scratch + n_experts;
  float* group_score = scratch + 2 * n_experts;
  if (rule.softmax_top_k) {
    for (int64_t e = 0; e < n_experts; ++e) scores[e] = logits[e];
  } else if (rule.sigmoid) {
    for (int64_t e = 0; e < n_experts; ++e) scores[e] = 1.0f / (1.0f + expf(-logits[e]));
  } else {
    float max_logit = logits[0];
    for (int64_t e = 1; e < n_experts; ++e) max_logit = max_logit < logits[e] ? logits[e] : max_logit;
    float sum = 0.0f;
    for (int64_t e = 0; e < n_experts; ++e) {
      scores[e] = expf(logits[e] - max_logit);
      sum += scores[e];
    }
    for (int64_t e = 0; e < n_experts; ++e) scores[e] /= sum;
  }
  for (int64_t e = 0; e < n_experts; ++e) choice[e] = rule.bias ? scores[e] + rule.bias[e] : scores[e];

  // Excluded experts get -INFINITY in `choice`; a group's eligibility is decided once.
  if (rule.n_groups > 1 && rule.n_groups_used < rule.n_groups) {
    const int64_t per_group = n_experts / rule.n_groups;
    for (int64_t g = 0; g < rule.n_groups; ++g) {
      float first = -INFINITY, second = -INFINITY;
      for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
        if (choice[e] > first) {
          second = first;
          first = choice[e];
        } else if (choice[e] > second) {
          second = choice[e];
        }
      }
      group_score[g] = per_group > 1 ? first + second : first;
    }
    // Keep the n_groups_used best groups: a kept group's score becomes +INFINITY.
    for (int64_t s = 0; s < rule.n_groups_used; ++s) {
      int64_t best = -1;
      for (int64_t g = 0; g < rule.n_groups; ++g) {
        if (group_score[g] == INFINITY) continue;
        if (best < 0 || group_score[g] > group_score[best]) best = g;
      }
      group_score[best] = INFINITY;
    }
    for (int64_t g = 0; g < rule.n_groups; ++g) {
      if (group_score[g] == INFINITY) continue;
      for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) choice[e] = -INFINITY;
    }
  }

  // Selection by repeated scans (k is small).
  for (int64_t s = 0; s < k; ++s) {
    int64_t best = -1;
    for (int64_t e = 0; e < n_experts; ++e) {
      if (choice[e] == -INFINITY) continue;
      bool taken = false;
      for (int64_t p = 0; p < s; ++p) taken = taken || ids[p] == e;
      if (!taken && (best < 0 || choice[e] > choice[best])) best = e;
    }
    ids[s] = static_cast<int32_t>(best);
    weights[s] = scores[best];
  }
  if (rule.softmax_top_k) {
    float max_logit = weights[0];
    for (int64_t s = 1; s < k; ++s) max_logit = max_logit < weights[s] ? weights[s] : max_logit;
    float sum = 0.0f;
    for (int64_t s = 0; s < k; ++s) {
      weights[s] = expf(weights[s] - max_logit);
      sum += weights[s];
    }
    for (int64_t s = 0; s < k; ++s) weights[s] /= sum;
  }
  if (rule.normalize_top_k) {
    float total = 0.0f;
    for (int64_t s = 0; s < k; ++s) total += weights[s];
    for (int64_t s = 0; s < k; ++s) weights[s] /= total;
  }
  if (rule.scale != 1.0f) {
    for (int64_t s = 0; s < k; ++s) weights[s] *= rule.scale;
  }
}

}  // namespace cadenza::kernels
