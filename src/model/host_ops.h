// Host-side pieces of the bidirectional encoders (bert, the CLIP/SigLIP vision encoder in
// src/vision): the ops the backend has no kernel for, run over host copies of activations.
// All functions are pure (no shared state) and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace cadenza::gguf {
class GgufFile;
}

namespace cadenza::model {

// A small tensor (a norm's weight or bias, a classification head, a patch embedding) dequantized
// to host floats, its shape checked: `cols` per row (ggml dimension 0) and `rows` rows (the
// product of the other dimensions). Errors name the file and the tensor.
Result<std::vector<float>> host_tensor(const gguf::GgufFile& f, const std::string& name,
                                       int64_t cols, int64_t rows = 1);

// x[r] = (x[r] - mean) / sqrt(var + eps) * w + b for each of the n rows of d elements.
void layer_norm(std::vector<float>& x, int64_t n, int64_t d, const std::vector<float>& w,
                const std::vector<float>& b, float eps);

// Full (bidirectional) softmax attention within each sequence: q, k, v and out are [rows][d]
// row-major with d = n_heads * head_dim; sequence s is rows [starts[s], starts[s] + lengths[s]).
// out = softmax(q k^T / sqrt(head_dim)) v per head. Spreads large batches over the cores; the
// result does not depend on the thread count.
void bidirectional_attention(const float* q, const float* k, const float* v, float* out, int64_t d,
                             int64_t n_heads, const std::vector<int64_t>& starts,
                             const std::vector<int64_t>& lengths);

// GELU, exact: 0.5 x (1 + erf(x / sqrt 2)).
void gelu_erf(std::vector<float>& x);
// GELU, the tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void gelu_tanh(std::vector<float>& x);
// "Quick GELU" (OpenAI CLIP): x * sigmoid(1.702 x).
void gelu_quick(std::vector<float>& x);

}  // namespace cadenza::model
