// Dispatch of the attention inner loop and its scalar reference (attention.h).
#include "kernels/simd/attention.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <limits>

#include "kernels/simd/isa.h"
#include "tensor/quant.h"

namespace cadenza::simd {

namespace {

// The fixed-order dot product of the reference: 8 interleaved partial sums (element i goes to
// sum i % 8), combined pairwise. The same order as the CPU backend's dot().
float dot8(const float* a, const float* b, int64_t n) {
  std::array<float, 8> acc{};
  const int64_t full = n / 8 * 8;
  for (int64_t i = 0; i < full; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  for (int64_t i = full; i < n; ++i) acc[i - full] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

}  // namespace

bool attend_available(int dk, int dv) {
  return active_isa() >= Isa::avx512 && dk > 0 && dv > 0 && dk % 16 == 0 && dv % 16 == 0;
}

bool attend_type_supported(DType type, int dk, int dv) {
  if (dk <= 0 || dv <= 0) return false;
  switch (type) {
    case DType::F32:
    case DType::F16: return true;
    case DType::Q8_0: return dk % 32 == 0 && dv % 32 == 0;
    default: return false;
  }
}

void attend(const float* const* q, int nq, const void* const* k_rows, const void* const* v_rows,
            DType type, int64_t n, int dk, int dv, float scale, const float* sinks,
            float* const* out, float* scratch) {
  assert(attend_available(dk, dv) && attend_type_supported(type, dk, dv));
  assert(nq >= 1 && nq <= kAttendMaxHeads && n >= 1);
  detail::attend_avx512(q, nq, k_rows, v_rows, type, n, dk, dv, scale, sinks, out, scratch);
}

void attend_partial(const float* const* q, int nq, const void* const* k_rows,
                    const void* const* v_rows, DType type, int64_t n, int dk, int dv, float scale,
                    float* const* out, float* part_max, float* part_sum, float* scratch) {
  assert(attend_available(dk, dv) && attend_type_supported(type, dk, dv));
  assert(nq >= 1 && nq <= kAttendMaxHeads && n >= 1 && part_max && part_sum);
  detail::attend_avx512(q, nq, k_rows, v_rows, type, n, dk, dv, scale, nullptr, out, scratch,
                        part_max, part_sum);
}

void attend_combine(const float* acc, const float* max, const float* sum, int64_t stride,
                    int64_t n_parts, int dv, const float* sinks, int h, float* out) {
  assert(n_parts >= 1 && dv >= 1);
  float m = max[0];
  for (int64_t s = 1; s < n_parts; ++s) m = std::max(m, max[s * stride]);
  float l = 0.0f;
  std::fill(out, out + dv, 0.0f);
  for (int64_t s = 0; s < n_parts; ++s) {
    const float c = std::exp(max[s * stride] - m);
    l += sum[s * stride] * c;
    const float* a = acc + s * stride;
    for (int i = 0; i < dv; ++i) out[i] += a[i] * c;
  }
  const float f = attend_final_scale(m, l, sinks, h);
  for (int i = 0; i < dv; ++i) out[i] *= f;
}

float attend_final_scale(float running_max, float running_sum, const float* sinks, int h) {
  if (!sinks) return 1.0f / running_sum;
  const float sink = sinks[h];
  const float m = std::max(running_max, sink);
  const float c = std::exp(running_max - m);
  return c / (running_sum * c + std::exp(sink - m));
}

namespace {

// Chunk by chunk: the chunk's K/V rows are decoded once (F16/Q8_0) for all nq heads; then per
// head the scores, the online-softmax update and the weighted value sum, element by element.
// With part_max/part_sum: the partial form (attend_partial_ref).
void attend_ref_impl(const float* const* q, int nq, const void* const* k_rows,
                     const void* const* v_rows, DType type, int64_t n, int dk, int dv,
                     float scale, const float* sinks, float* const* out, float* scratch,
                     float* part_max, float* part_sum) {
  assert(attend_type_supported(type, dk, dv) && nq >= 1 && nq <= kAttendMaxHeads && n >= 1);
  float* scores = scratch;                                  // [kAttendChunk]
  float* acc = scores + kAttendChunk;                       // [nq][dv]
  float* k_dec = acc + static_cast<int64_t>(nq) * dv;       // [kAttendChunk][dk]
  float* v_dec = k_dec + static_cast<int64_t>(kAttendChunk) * dk;  // [kAttendChunk][dv]
  float running_max[kAttendMaxHeads], running_sum[kAttendMaxHeads];
  for (int h = 0; h < nq; ++h) {
    running_max[h] = -std::numeric_limits<float>::infinity();
    running_sum[h] = 0.0f;
  }
  std::fill(acc, acc + static_cast<int64_t>(nq) * dv, 0.0f);
  const float* kp[kAttendChunk];
  const float* vp[kAttendChunk];
  for (int64_t start = 0; start < n; start += kAttendChunk) {
    const int count = static_cast<int>(std::min<int64_t>(kAttendChunk, n - start));
    for (int j = 0; j < count; ++j) {
      if (type == DType::F32) {
        kp[j] = static_cast<const float*>(k_rows[start + j]);
        vp[j] = static_cast<const float*>(v_rows[start + j]);
      } else {
        // Exact: an f16 is an f32; Q8_0 decodes as fp16_to_fp32(d) * q.
        dequantize_row(type, k_rows[start + j], k_dec + static_cast<int64_t>(j) * dk, dk);
        dequantize_row(type, v_rows[start + j], v_dec + static_cast<int64_t>(j) * dv, dv);
        kp[j] = k_dec + static_cast<int64_t>(j) * dk;
        vp[j] = v_dec + static_cast<int64_t>(j) * dv;
      }
    }
    for (int h = 0; h < nq; ++h) {
      float* ah = acc + static_cast<int64_t>(h) * dv;
      float chunk_max = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < count; ++j) {
        scores[j] = dot8(q[h], kp[j], dk) * scale;
        chunk_max = std::max(chunk_max, scores[j]);
      }
      const float new_max = std::max(running_max[h], chunk_max);
      // Rescale what was accumulated under the old maximum (exp(-inf) = 0 on the first chunk).
      const float correction = std::exp(running_max[h] - new_max);
      running_sum[h] *= correction;
      for (int i = 0; i < dv; ++i) ah[i] *= correction;
      for (int j = 0; j < count; ++j) {
        const float p = std::exp(scores[j] - new_max);
        running_sum[h] += p;
        for (int i = 0; i < dv; ++i) ah[i] += p * vp[j][i];
      }
      running_max[h] = new_max;
    }
  }
  for (int h = 0; h < nq; ++h) {
    const float* ah = acc + static_cast<int64_t>(h) * dv;
    if (part_max) {
      part_max[h] = running_max[h];
      part_sum[h] = running_sum[h];
      std::copy(ah, ah + dv, out[h]);
      continue;
    }
    const float inv_sum = attend_final_scale(running_max[h], running_sum[h], sinks, h);
    for (int i = 0; i < dv; ++i) out[h][i] = ah[i] * inv_sum;
  }
}

}  // namespace

void attend_ref(const float* const* q, int nq, const void* const* k_rows,
                const void* const* v_rows, DType type, int64_t n, int dk, int dv, float scale,
                const float* sinks, float* const* out, float* scratch) {
  attend_ref_impl(q, nq, k_rows, v_rows, type, n, dk, dv, scale, sinks, out, scratch, nullptr, nullptr);
}

void attend_partial_ref(const float* const* q, int nq, const void* const* k_rows,
                        const void* const* v_rows, DType type, int64_t n, int dk, int dv,
                        float scale, float* const* out, float* part_max, float* part_sum,
                        float* scratch) {
  assert(part_max && part_sum);
  attend_ref_impl(q, nq, k_rows, v_rows, type, n, dk, dv, scale, nullptr, out, scratch, part_max, part_sum);
}

void attend_tile(const AttendTile& tile, float* scratch) {
  assert(attend_available(tile.dk, tile.dv) && attend_type_supported(tile.type, tile.dk, tile.dv));
  assert(tile.nt >= 1 && tile.nt <= kAttendTileTokens && tile.nq >= 1 && tile.nq <= kAttendMaxHeads);
  detail::attend_tile_avx512(tile, scratch);
}

// The reference of the tile is the reference of each token alone.
void attend_tile_ref(const AttendTile& tile, float* scratch) {
  assert(tile.nt >= 1 && tile.nt <= kAttendTileTokens);
  for (int t = 0; t < tile.nt; ++t) {
    const float* const* q = tile.q + static_cast<int64_t>(t) * tile.nq;
    float* const* out = tile.out + static_cast<int64_t>(t) * tile.nq;
    const bool partial = tile.part_max && tile.part_max[t];
    attend_ref_impl(q, tile.nq, tile.k_rows, tile.v_rows, tile.type, tile.n[t], tile.dk, tile.dv,
                    tile.scale, partial ? nullptr : tile.sinks, out, scratch,
                    partial ? tile.part_max[t] : nullptr, partial ? tile.part_sum[t] : nullptr);
  }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  assert(attend_available(16, 16));
  detail::swiglu_avx512(gate, up, out, n);
}

}  // namespace cadenza::simd
