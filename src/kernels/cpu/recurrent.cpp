// The CPU backend's linear-attention ops (Backend::short_conv, gated_delta_rule, ssm_scan): the
// batch's tokens in order, each through its sequence's state row, with the per-token kernels of
// simd/recurrent.h. Batch invariance: a token reads and writes only its own sequence's state
// row, and every reduction runs in the kernels' fixed order.
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/simd/recurrent.h"

namespace cadenza::kernels::cpu {

void short_conv(Matrix x, const CpuWeight& w, const float* bias, Matrix state,
                const RecurrentBatch& batch, Matrix out) {
  const int64_t C = x.cols, K = w.cols();
  assert(w.type() == DType::F32 && w.rows() == C && state.cols == (K - 1) * C);
  assert(out.cols == C && out.rows == x.rows && batch.state_slots.rows == x.rows);
  const float* weights = reinterpret_cast<const float*>(w.data);
  // Serial over tokens and channels: tokens of one sequence depend on each other, and the
  // convolution is a few multiply-adds per channel next to the projections around it.
  for (int64_t t = 0; t < x.rows; ++t) {
    float* row = state.data + static_cast<int64_t>(batch.state_slots.data[t]) * state.stride;
    if (batch.positions.data[t] == 0) std::memset(row, 0, static_cast<size_t>(state.cols) * sizeof(float));
    simd::short_conv_step(row, x.data + t * x.stride, weights, bias, K, C,
                          out.data + t * out.stride);
  }
}

namespace {

// dst = src / sqrt(sum src^2 + eps) * scale, n values.
void l2_normalize(const float* src, int64_t n, float eps, float scale, float* dst) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum = sum + src[i] * src[i];
  const float inv = scale / std::sqrt(sum + eps);
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * inv;
}

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace

void gated_delta_rule(ThreadPool& pool, Matrix q, Matrix k, Matrix v, Matrix alpha, Matrix beta,
                      Matrix state, const RecurrentBatch& batch, const DeltaRuleParams& p,
                      const float* a, const float* dt_bias, Matrix out) {
  const int64_t dk = p.dk, dv = p.dv, hv = p.n_v_heads, hk = p.n_k_heads;
  assert(q.cols == p.n_k_heads * dk && k.cols == q.cols && v.cols == hv * dv);
  assert(alpha.cols == hv && beta.cols == hv && out.cols == hv * dv);
  assert(state.cols == hv * dk * dv && p.n_v_heads % p.n_k_heads == 0);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  // One value head per task, its tokens in batch order (they may share a sequence).
  pool.parallel_for(hv, [&](int64_t h, int) {
    float* qk = thread_scratch(Scratch::RowTemp, static_cast<size_t>(2 * dk));
    const int64_t kh = h % hk;
    for (int64_t t = 0; t < q.rows; ++t) {
      float* S = state.data + static_cast<int64_t>(batch.state_slots.data[t]) * state.stride +
                 h * dk * dv;
      if (batch.positions.data[t] == 0) std::memset(S, 0, static_cast<size_t>(dk * dv) * sizeof(float));
      l2_normalize(q.data + t * q.stride + kh * dk, dk, p.l2_eps, q_scale, qk);
      l2_normalize(k.data + t * k.stride + kh * dk, dk, p.l2_eps, 1.0f, qk + dk);
      const float g = a[h] * softplus(alpha.data[t * alpha.stride + h] + dt_bias[h]);
      const float b = 1.0f / (1.0f + std::exp(-beta.data[t * beta.stride + h]));
      simd::delta_rule_step(S, qk, qk + dk, v.data + t * v.stride + h * dv, std::exp(g), b, dk,
                            dv, out.data + t * out.stride + h * dv);
    }
  });
}

void ssm_scan(ThreadPool& pool, Matrix x, Matrix b, Matrix c, Matrix dt, Matrix state,
              const RecurrentBatch& batch, const SsmScanParams& p, const float* a,
              const float* d, const float* dt_bias, Matrix out) {
  const int64_t nh = p.n_heads, ng = p.n_groups, hd = p.head_dim, ns = p.state_size;
  assert(x.cols == nh * hd && out.cols == nh * hd && dt.cols == nh);
  assert(b.cols == ng * ns && c.cols == ng * ns && nh % ng == 0);
  assert(state.cols == nh * ns * hd);
  const int64_t heads_per_group = nh / ng;
  // One head per task, its tokens in batch order (they may share a sequence).
  pool.parallel_for(nh, [&](int64_t h, int) {
    const int64_t g = h / heads_per_group;
    for (int64_t t = 0; t < x.rows; ++t) {
      float* S = state.data + static_cast<int64_t>(batch.state_slots.data[t]) * state.stride +
                 h * ns * hd;
      if (batch.positions.data[t] == 0) {
        std::memset(S, 0, static_cast<size_t>(ns * hd) * sizeof(float));
      }
      const float step = softplus(dt.data[t * dt.stride + h] + dt_bias[h]);
      const float* xt = x.data + t * x.stride + h * hd;
      float* o = out.data + t * out.stride + h * hd;
      simd::ssm_scan_step(S, xt, b.data + t * b.stride + g * ns, c.data + t * c.stride + g * ns,
                          std::exp(step * a[h]), step, ns, hd, o);
      for (int64_t j = 0; j < hd; ++j) o[j] = o[j] + d[h] * xt[j];
    }
  });
}

}  // namespace cadenza::kernels::cpu
