// Scalar reference (de)quantization for every compute-supported DType, following the GGUF block
// layouts bit for bit (see tensor/blocks.h). These are the ground truth that SIMD kernels are
// tested against; they favour clarity over speed.
//
// Shapes: n is the number of elements of a row and must be a multiple of the type's block size
// (callers check with row_bytes()). src/dst buffers must hold row_bytes(t, n) bytes / n floats;
// quantized buffers need no alignment (blocks are copied in and out with memcpy).
// Types: every compute_supported type, plus the activation formats Q8_1 and Q8_K (not
// compute_supported because they never hold weights). Anything else asserts.
// Floats given to quantize_row must be finite. Accuracy bounds per type: src/tensor/README.md.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace cadenza {

// IEEE half and bfloat16 conversions (round to nearest even; NaN stays NaN and keeps as much of
// its payload as fits; overflow goes to infinity; fp16 subnormals are exact).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

// Decodes n elements of type t at src into dst (t: see "Types" above).
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// Encodes n floats into type t at dst (t: see "Types" above). Q4_0..Q6_K choose scales the way
// the reference implementation's *_ref quantizers do (round-to-nearest for the 32-blocks; the
// searched scales/mins for the K-quants); Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4 and the grid types
// (IQ2_*, IQ3_*, IQ1_*) use our own searches (src/tensor/README.md), valid but not identical
// blocks. The grid types' encoders are slow (about 1.3 M elements/s).
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// Like quantize_row, but the blocks minimise sum_i importance[i] * (src[i] - decoded[i])^2
// (importance: n values >= 0, the mean squared activation of each input channel; see
// quantize/imatrix.h) with our own searches (quant_weighted.cpp): exact over the scale for the
// symmetric types, wider than the reference quantizer's for the others. Types with such a
// search: has_weighted_quantizer; any other type is encoded as quantize_row does.
void quantize_row_weighted(DType t, const float* src, void* dst, int64_t n, const float* importance);
bool has_weighted_quantizer(DType t);

}  // namespace cadenza
