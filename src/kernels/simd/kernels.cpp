// Public entry points: each call reads the active level once and jumps to that level's kernel.
#include "kernels/simd/kernels.h"

#include <cassert>
#include <cstring>

#include "kernels/simd/internal.h"
#include "tensor/blocks.h"

namespace cadenza::simd {

using detail::active_table;

void quantize_q8_0(const float* x, int64_t k, void* dst) {
  assert(k % kQK == 0);
  active_table().quantize_q8_0(x, k, dst);
}
void quantize_q8_k(const float* x, int64_t k, void* dst) {
  assert(k % kQK_K == 0);
  active_table().quantize_q8_k(x, k, dst);
}

#define CADENZA_SIMD_GEMM(type, act_t, block)                                                   \
  void gemm_##type(const void* w, int64_t rows, int64_t k, const act_t* a, int64_t n, float* out, \
                   int64_t ldo) {                                                                 \
    assert(k > 0 && k % (block) == 0 && rows >= 0 && n >= 1 && (n == 1 || ldo >= rows));          \
    active_table().gemm_##type(w, rows, k, a, n, out, ldo);                                       \
  }                                                                                               \
  void gemv_##type(const void* w, int64_t rows, int64_t k, const act_t* a, float* out) {         \
    assert(k > 0 && k % (block) == 0 && rows >= 0);                                               \
    active_table().gemm_##type(w, rows, k, a, 1, out, rows);                                      \
  }

CADENZA_SIMD_GEMM(q8_0, void, kQK)
CADENZA_SIMD_GEMM(q4_0, void, kQK)
CADENZA_SIMD_GEMM(q4_k, void, kQK_K)
CADENZA_SIMD_GEMM(q6_k, void, kQK_K)
CADENZA_SIMD_GEMM(f16, float, 1)
CADENZA_SIMD_GEMM(bf16, float, 1)
CADENZA_SIMD_GEMM(q2_k, void, kQK_K)
CADENZA_SIMD_GEMM(q3_k, void, kQK_K)
CADENZA_SIMD_GEMM(iq4_xs, void, kQK_K)
CADENZA_SIMD_GEMM(iq4_nl, void, kQK)
CADENZA_SIMD_GEMM(mxfp4, void, kQK)
CADENZA_SIMD_GEMM(iq2_xxs, void, kQK_K)
CADENZA_SIMD_GEMM(iq2_xs, void, kQK_K)
CADENZA_SIMD_GEMM(iq2_s, void, kQK_K)
CADENZA_SIMD_GEMM(iq3_xxs, void, kQK_K)
CADENZA_SIMD_GEMM(iq3_s, void, kQK_K)
CADENZA_SIMD_GEMM(iq1_s, void, kQK_K)
CADENZA_SIMD_GEMM(iq1_m, void, kQK_K)
#undef CADENZA_SIMD_GEMM

std::optional<DType> activation_dtype(DType weight) {
  switch (weight) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::IQ4_NL:
    case DType::MXFP4: return DType::Q8_0;
    case DType::Q4_K:
    case DType::Q6_K:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_XS:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ1_S:
    case DType::IQ1_M: return DType::Q8_K;
    case DType::F16:
    case DType::BF16: return DType::F32;
    default: return std::nullopt;
  }
}

Result<int64_t> activation_row_bytes(DType weight, int64_t k) {
  std::optional<DType> at = activation_dtype(weight);
  if (!at) return make_error("simd: no kernel for weight type {}", dtype_name(weight));
  std::optional<uint64_t> wb = row_bytes(weight, k);
  std::optional<uint64_t> ab = row_bytes(*at, k);
  if (k <= 0 || !wb || !ab)
    return make_error("simd: row length {} does not fit weight type {} (activations {})", k,
                      dtype_name(weight), dtype_name(*at));
  return static_cast<int64_t>(*ab);
}

Status quantize_activations(DType weight, const float* x, int64_t k, int64_t n, void* act) {
  Result<int64_t> bytes = activation_row_bytes(weight, k);
  if (!bytes) return bytes.error_value();
  if (n < 1) return make_error("simd: batch of {} activation rows", n);
  std::optional<DType> at = activation_dtype(weight);
  if (*at == DType::F32) return {};
  auto* dst = static_cast<uint8_t*>(act);
  for (int64_t j = 0; j < n; ++j) {
    if (*at == DType::Q8_0)
      quantize_q8_0(x + j * k, k, dst + j * *bytes);
    else
      quantize_q8_k(x + j * k, k, dst + j * *bytes);
  }
  return {};
}

Status gemm(DType weight, const void* weights, int64_t rows, int64_t k, const void* act, int64_t n,
            float* out, int64_t ldo) {
  Result<int64_t> bytes = activation_row_bytes(weight, k);
  if (!bytes) return bytes.error_value();
  if (rows < 0 || n < 1 || (n > 1 && ldo < rows))
    return make_error("simd: bad gemm shape rows={} n={} ldo={}", rows, n, ldo);
  const auto* fact = static_cast<const float*>(act);
  switch (weight) {
    case DType::Q8_0: gemm_q8_0(weights, rows, k, act, n, out, ldo); break;
    case DType::Q4_0: gemm_q4_0(weights, rows, k, act, n, out, ldo); break;
    case DType::Q4_K: gemm_q4_k(weights, rows, k, act, n, out, ldo); break;
    case DType::Q6_K: gemm_q6_k(weights, rows, k, act, n, out, ldo); break;
    case DType::F16: gemm_f16(weights, rows, k, fact, n, out, ldo); break;
    case DType::BF16: gemm_bf16(weights, rows, k, fact, n, out, ldo); break;
    case DType::Q2_K: gemm_q2_k(weights, rows, k, act, n, out, ldo); break;
    case DType::Q3_K: gemm_q3_k(weights, rows, k, act, n, out, ldo); break;
    case DType::IQ4_XS: gemm_iq4_xs(weights, rows, k, act, n, out, ldo); break;
    case DType::IQ4_NL: gemm_iq4_nl(weights, rows, k, act, n, out, ldo); break;
    case DType::MXFP4: gemm_mxfp4(weights, rows, k, act, n, out, ldo); break;
    case DType::IQ2_XXS: gemm_iq2_xxs(weights, rows, k, act, n, out, ldo); break;
    case DType::IQ2_XS: gemm_iq2_xs(weights, rows, k, act, n, out, ldo); break;
    case DType::IQ2_S: gemm_iq2_s(weights, rows, k, act, n, out, ldo); break;
    case DType::IQ3_XXS: gemm_iq3_xxs(weights, rows, k, act, n, out, ldo); break;
    case DType::IQ3_S: gemm_iq3_s(weights, rows, k, act, n, out, ldo); break;
    case DType::IQ1_S: gemm_iq1_s(weights, rows, k, act, n, out, ldo); break;
    case DType::IQ1_M: gemm_iq1_m(weights, rows, k, act, n, out, ldo); break;
    default: return make_error("simd: no kernel for weight type {}", dtype_name(weight));
  }
  return {};
}

}  // namespace cadenza::simd
