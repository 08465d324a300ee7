// CPU row-wise ops: bias, RMS norm, elementwise, SwiGLU, RoPE, expert routing.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/moe_routing.h"
#include "kernels/rope_frequency.h"
#include "kernels/simd/attention.h"

namespace cadenza::kernels::cpu {

namespace {

// Runs fn(row) for every row; rows are grouped so that each task has a few thousand elements.
template <typename Fn>
void for_each_row(ThreadPool& pool, int64_t rows, int64_t cols, Fn&& fn) {
  const int64_t rows_per_task = std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1));
  const int64_t tasks = (rows + rows_per_task - 1) / rows_per_task;
  pool.parallel_for(tasks, [&](int64_t task, int) {
    const int64_t end = std::min(rows, (task + 1) * rows_per_task);
    for (int64_t r = task * rows_per_task; r < end; ++r) fn(r);
  });
}

[[maybe_unused]] bool same_shape(const Matrix& a, const Matrix& b) { return a.rows == b.rows && a.cols == b.cols; }

}  // namespace

void add_bias(ThreadPool& pool, Matrix x, const float* bias, Matrix out) {
  assert(same_shape(x, out));
  for_each_row(pool, x.rows, x.cols, [&](int64_t r) {
    const float* xr = x.data + r * x.stride;
    float* o = out.data + r * out.stride;
    for (int64_t i = 0; i < x.cols; ++i) o[i] = xr[i] + bias[i];
  });
}

void rms_norm(ThreadPool& pool, Matrix x, const float* weight, float eps, Matrix out) {
  assert(same_shape(x, out));
  for_each_row(pool, x.rows, x.cols, [&](int64_t r) {
    const float* xr = x.data + r * x.stride;
    float* o = out.data + r * out.stride;
    double sum_sq = 0.0;  // in order, in double: exact enough that the order hardly matters
    for (int64_t i = 0; i < x.cols; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const float mean = static_cast<float>(sum_sq / static_cast<double>(x.cols));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < x.cols; ++i) o[i] = (xr[i] * scale) * weight[i];
  });
}

void add(ThreadPool& pool, Matrix a, Matrix b, Matrix out) {
  assert(same_shape(a, b) && same_shape(a, out));
  for_each_row(pool, a.rows, a.cols, [&](int64_t r) {
    const float* ar = a.data + r * a.stride;
    const float* br = b.data + r * b.stride;
    float* o = out.data + r * out.stride;
    for (int64_t i = 0; i < a.cols; ++i) o[i] = ar[i] + br[i];
  });
}

void mul(ThreadPool& pool, Matrix a, Matrix b, Matrix out) {
  assert(same_shape(a, b) && same_shape(a, out));
  for_each_row(pool, a.rows, a.cols, [&](int64_t r) {
    const float* ar = a.data + r * a.stride;
    const float* br = b.data + r * b.stride;
    float* o = out.data + r * out.stride;
    for (int64_t i = 0; i < a.cols; ++i) o[i] = ar[i] * br[i];
  });
}

void swiglu(ThreadPool& pool, Matrix gate, Matrix up, Matrix out) {
  assert(same_shape(gate, up) && same_shape(gate, out));
  const bool vectorised = simd::attend_available(16, 16);  // AVX-512: vector exp
  for_each_row(pool, gate.rows, gate.cols, [&](int64_t r) {
    const float* g = gate.data + r * gate.stride;
    const float* u = up.data + r * up.stride;
    float* o = out.data + r * out.stride;
    if (vectorised) {
      simd::swiglu(g, u, o, gate.cols);
      return;
    }
    for (int64_t i = 0; i < gate.cols; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  });
}

// Scalar on purpose: it runs on one value per token (the shared-expert gate of qwen2moe).
void sigmoid(ThreadPool& pool, Matrix x, Matrix out) {
  assert(same_shape(x, out));
  for_each_row(pool, x.rows, x.cols, [&](int64_t r) {
    const float* in = x.data + r * x.stride;
    float* o = out.data + r * out.stride;
    for (int64_t i = 0; i < x.cols; ++i) o[i] = 1.0f / (1.0f + std::exp(-in[i]));
  });
}

// Scalar: std::exp per element (the expert FFN widths it runs on are small next to the matmuls).
void swiglu_clamped(ThreadPool& pool, Matrix gate, Matrix up, float alpha, float limit, Matrix out) {
  assert(same_shape(gate, up) && same_shape(gate, out));
  for_each_row(pool, gate.rows, gate.cols, [&](int64_t r) {
    const float* g = gate.data + r * gate.stride;
    const float* u = up.data + r * up.stride;
    float* o = out.data + r * out.stride;
    for (int64_t i = 0; i < gate.cols; ++i) {
      const float x = std::min(g[i], limit);
      const float y = std::clamp(u[i], -limit, limit);
      o[i] = (y + 1.0f) * (x / (1.0f + std::exp(-alpha * x)));
    }
  });
}

void scale(ThreadPool& pool, Matrix x, float s, Matrix out) {
  assert(same_shape(x, out));
  for_each_row(pool, x.rows, x.cols, [&](int64_t r) {
    const float* in = x.data + r * x.stride;
    float* o = out.data + r * out.stride;
    for (int64_t i = 0; i < x.cols; ++i) o[i] = in[i] * s;
  });
}

// Scalar: std::tanh per element.
void geglu(ThreadPool& pool, Matrix gate, Matrix up, Matrix out) {
  assert(same_shape(gate, up) && same_shape(gate, out));
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  for_each_row(pool, gate.rows, gate.cols, [&](int64_t r) {
    const float* g = gate.data + r * gate.stride;
    const float* u = up.data + r * up.stride;
    float* o = out.data + r * out.stride;
    for (int64_t i = 0; i < gate.cols; ++i) {
      const float x = g[i];
      const float t = std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x));
      const float gelu = 0.5f * x * (1.0f + t);
      o[i] = gelu * u[i];
    }
  });
}

void softcap(ThreadPool& pool, Matrix x, float cap, Matrix out) {
  assert(same_shape(x, out) && cap > 0);
  for_each_row(pool, x.rows, x.cols, [&](int64_t r) {
    const float* in = x.data + r * x.stride;
    float* o = out.data + r * out.stride;
    for (int64_t i = 0; i < x.cols; ++i) o[i] = cap * std::tanh(in[i] / cap);
  });
}

void scale_by_position(ThreadPool& pool, Matrix x, IndexMatrix positions, float beta,
                       int32_t length, int32_t offset, Matrix out) {
  assert(same_shape(x, out) && positions.rows == x.rows && length >= 1);
  for_each_row(pool, x.rows, x.cols, [&](int64_t r) {
    const int64_t p = int64_t{positions.data[r * positions.cols]} + offset;
    const float s = 1.0f + beta * std::log(1.0f + static_cast<float>(p / length));
    const float* in = x.data + r * x.stride;
    float* o = out.data + r * out.stride;
    for (int64_t i = 0; i < x.cols; ++i) o[i] = in[i] * s;
  });
}

void add_expert_bias(ThreadPool& pool, Matrix y, const CpuWeight& bias, IndexMatrix expert_ids) {
  assert(y.rows == expert_ids.rows * expert_ids.cols && bias.cols() == y.cols);
  for_each_row(pool, y.rows, y.cols, [&](int64_t r) {
    const int32_t e = expert_ids.data[r];  // row t*K + s is element (t, s)
    if (e < 0) return;
    assert(e < bias.rows());
    float* o = y.data + r * y.stride;
    const float* b;
    if (bias.type() == DType::F32) {
      b = reinterpret_cast<const float*>(bias.row(0, e));
    } else {
      float* decoded = thread_scratch(Scratch::RowTemp, static_cast<size_t>(y.cols));
      decode_row(bias.type(), bias.row(0, e), decoded, y.cols);
      b = decoded;
    }
    for (int64_t i = 0; i < y.cols; ++i) o[i] += b[i];
  });
}

void rope(ThreadPool& pool, Matrix x, int32_t n_heads, int32_t head_dim, IndexMatrix positions,
          const RopeParams& params, const float* freq_factors) {
  assert(n_heads >= 1 && x.cols >= static_cast<int64_t>(n_heads - 1) * head_dim + params.n_dims);
  assert(positions.rows == x.rows);
  assert(params.n_dims > 0 && params.n_dims % 2 == 0 && params.n_dims <= head_dim);
  const int32_t half = params.n_dims / 2;
  const RopeFrequency freq = make_rope_frequency(params.n_dims, params.freq_base, params.freq_scale,
                                                 params.ext_factor, params.beta_fast,
                                                 params.beta_slow, params.orig_ctx);
  // Angle per unit of position for each pair, in double.
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int32_t i = 0; i < half; ++i) {
    inv_freq[static_cast<size_t>(i)] =
        rope_inv_freq(freq, i, freq_factors ? static_cast<double>(freq_factors[i]) : 1.0);
  }
  const bool neox = params.layout == RopeLayout::NeoX;
  const double attn_factor = params.attn_factor;
  pool.parallel_for(x.rows, [&](int64_t r, int) {
    float* cs = thread_scratch(Scratch::RowTemp, 2 * static_cast<size_t>(half));
    const double pos = positions.data[r * positions.cols];
    for (int32_t i = 0; i < half; ++i) {
      const double theta = pos * inv_freq[static_cast<size_t>(i)];
      cs[2 * i] = static_cast<float>(std::cos(theta) * attn_factor);
      cs[2 * i + 1] = static_cast<float>(std::sin(theta) * attn_factor);
    }
    float* row = x.data + r * x.stride;
    for (int32_t h = 0; h < n_heads; ++h) {
      float* head = row + static_cast<int64_t>(h) * head_dim;
      for (int32_t i = 0; i < half; ++i) {
        const int32_t i0 = neox ? i : 2 * i;
        const int32_t i1 = neox ? i + half : 2 * i + 1;
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float a = head[i0], b = head[i1];
        head[i0] = a * c - b * s;
        head[i1] = a * s + b * c;
      }
    }
  });
}

void route_experts(ThreadPool& pool, Matrix router_logits, const RoutingParams& params,
                   const float* bias, IndexMatrix expert_ids, Matrix expert_weights) {
  const int64_t n_experts = router_logits.cols;
  const int64_t k = expert_ids.cols;
  assert(expert_ids.rows == router_logits.rows && expert_weights.rows == router_logits.rows);
  assert(expert_weights.cols == k && k >= 1 && k <= n_experts);
  assert(params.n_groups >= 1 && n_experts % params.n_groups == 0);
  assert(params.n_groups_used >= 1 && params.n_groups_used <= params.n_groups);
  const RouteRule rule{.sigmoid = params.gating == ExpertGating::Sigmoid,
                       .softmax_top_k = params.gating == ExpertGating::SoftmaxTopK,
                       .bias = bias,
                       .n_groups = params.n_groups,
                       .n_groups_used = params.n_groups_used,
                       .normalize_top_k = params.normalize_top_k,
                       .scale = params.scale};
  const size_t scratch_floats = static_cast<size_t>(route_scratch_floats(n_experts, params.n_groups));
  pool.parallel_for(router_logits.rows, [&](int64_t t, int) {
    float* scratch = thread_scratch(Scratch::RowTemp, scratch_floats);
    route_token(router_logits.data + t * router_logits.stride, n_experts, k, rule, scratch,
                expert_ids.data + t * k, expert_weights.data + t * expert_weights.stride);
  });
}

void weighted_sum_slots(ThreadPool& pool, Matrix slot_rows, Matrix weights, Matrix out) {
  const int64_t k = weights.cols;
  assert(slot_rows.rows == out.rows * k && slot_rows.cols == out.cols && weights.rows == out.rows);
  for_each_row(pool, out.rows, out.cols * k, [&](int64_t t) {
    float* o = out.data + t * out.stride;
    const float* w = weights.data + t * weights.stride;
    for (int64_t s = 0; s < k; ++s) {
      const float* src = slot_rows.data + (t * k + s) * slot_rows.stride;
      for (int64_t i = 0; i < out.cols; ++i) o[i] = s == 0 ? w[0] * src[i] : o[i] + w[s] * src[i];
    }
  });
}

}  // namespace cadenza::kernels::cpu
