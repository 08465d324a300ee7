// quant.h's row entry points: contract checks, the plain float types, and dispatch to the
// per-type block code (quant_legacy.cpp, quant_kquants.cpp, quant_kquants_low.cpp, quant_nl.cpp,
// quant_iq.cpp, quant_iq_encode.cpp).
#include "tensor/quant.h"

#include <cassert>
#include <cstring>

#include "tensor/quant_impl.h"

namespace cadenza {
namespace {

namespace qd = quant_detail;

// Whole blocks in a row of n elements of t, checking quant.h's contract.
int64_t block_count(DType t, int64_t n) {
  const DTypeTraits& tr = traits(t);
  assert(n >= 0 && n % tr.block_size == 0 && "row length must be a multiple of the block size");
  return n / tr.block_size;
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  const int64_t nb = block_count(t, n);
  if (n == 0) return;  // src/dst may then be null, which memcpy does not allow
  switch (t) {
    case DType::F32:
      std::memcpy(dst, s, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = t == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
      }
      return;
    case DType::Q4_0: return qd::dequantize_q4_0(s, dst, nb);
    case DType::Q4_1: return qd::dequantize_q4_1(s, dst, nb);
    case DType::Q5_0: return qd::dequantize_q5_0(s, dst, nb);
    case DType::Q5_1: return qd::dequantize_q5_1(s, dst, nb);
    case DType::Q8_0: return qd::dequantize_q8_0(s, dst, nb);
    case DType::Q8_1: return qd::dequantize_q8_1(s, dst, nb);
    case DType::Q4_K: return qd::dequantize_q4_K(s, dst, nb);
    case DType::Q5_K: return qd::dequantize_q5_K(s, dst, nb);
    case DType::Q6_K: return qd::dequantize_q6_K(s, dst, nb);
    case DType::Q8_K: return qd::dequantize_q8_K(s, dst, nb);
    case DType::Q2_K: return qd::dequantize_q2_K(s, dst, nb);
    case DType::Q3_K: return qd::dequantize_q3_K(s, dst, nb);
    case DType::IQ4_NL: return qd::dequantize_iq4_nl(s, dst, nb);
    case DType::IQ4_XS: return qd::dequantize_iq4_xs(s, dst, nb);
    case DType::MXFP4: return qd::dequantize_mxfp4(s, dst, nb);
    case DType::IQ2_XXS: return qd::dequantize_iq2_xxs(s, dst, nb);
    case DType::IQ2_XS: return qd::dequantize_iq2_xs(s, dst, nb);
    case DType::IQ2_S: return qd::dequantize_iq2_s(s, dst, nb);
    case DType::IQ3_XXS: return qd::dequantize_iq3_xxs(s, dst, nb);
    case DType::IQ3_S: return qd::dequantize_iq3_s(s, dst, nb);
    case DType::IQ1_S: return qd::dequantize_iq1_s(s, dst, nb);
    case DType::IQ1_M: return qd::dequantize_iq1_m(s, dst, nb);
    default:
      assert(false && "dequantize_row: unsupported type");
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  const int64_t nb = block_count(t, n);
  if (n == 0) return;  // src/dst may then be null, which memcpy does not allow
  switch (t) {
    case DType::F32:
      std::memcpy(d, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = t == DType::F16 ? fp32_to_fp16(src[i]) : fp32_to_bf16(src[i]);
        std::memcpy(d + 2 * i, &h, 2);
      }
      return;
    case DType::Q4_0: return qd::quantize_q4_0(src, d, nb);
    case DType::Q4_1: return qd::quantize_q4_1(src, d, nb);
    case DType::Q5_0: return qd::quantize_q5_0(src, d, nb);
    case DType::Q5_1: return qd::quantize_q5_1(src, d, nb);
    case DType::Q8_0: return qd::quantize_q8_0(src, d, nb);
    case DType::Q8_1: return qd::quantize_q8_1(src, d, nb);
    case DType::Q4_K: return qd::quantize_q4_K(src, d, nb);
    case DType::Q5_K: return qd::quantize_q5_K(src, d, nb);
    case DType::Q6_K: return qd::quantize_q6_K(src, d, nb);
    case DType::Q8_K: return qd::quantize_q8_K(src, d, nb);
    case DType::Q2_K: return qd::quantize_q2_K(src, d, nb);
    case DType::Q3_K: return qd::quantize_q3_K(src, d, nb);
    case DType::IQ4_NL: return qd::quantize_iq4_nl(src, d, nb);
    case DType::IQ4_XS: return qd::quantize_iq4_xs(src, d, nb);
    case DType::MXFP4: return qd::quantize_mxfp4(src, d, nb);
    case DType::IQ2_XXS: return qd::quantize_iq2_xxs(src, d, nb);
    case DType::IQ2_XS: return qd::quantize_iq2_xs(src, d, nb);
    case DType::IQ2_S: return qd::quantize_iq2_s(src, d, nb);
    case DType::IQ3_XXS: return qd::quantize_iq3_xxs(src, d, nb);
    case DType::IQ3_S: return qd::quantize_iq3_s(src, d, nb);
    case DType::IQ1_S: return qd::quantize_iq1_s(src, d, nb);
    case DType::IQ1_M: return qd::quantize_iq1_m(src, d, nb);
    default:
      assert(false && "quantize_row: unsupported type");
  }
}

void quantize_row_weighted(DType t, const float* src, void* dst, int64_t n, const float* importance) {
  const int64_t nb = block_count(t, n);
  if (n == 0) return;
  if (!qd::quantize_weighted_blocks(t, src, importance, static_cast<uint8_t*>(dst), nb)) {
    quantize_row(t, src, dst, n);
  }
}

bool has_weighted_quantizer(DType t) {
  switch (t) {
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::IQ4_NL:
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
    case DType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

}  // namespace cadenza
