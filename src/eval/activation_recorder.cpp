#include "eval/activation_recorder.h"

#include <cassert>

namespace cadenza::eval {
namespace {

// sum2[c] += x[c]^2 for one row of `cols` values.
void add_squares(const float* x, int64_t cols, double* sum2) {
  for (int64_t c = 0; c < cols; ++c) sum2[c] += static_cast<double>(x[c]) * static_cast<double>(x[c]);
}

}  // namespace

bool ActivationRecorder::wanted(const kernels::Weight& w) const {
  // token_embd.weight in a matmul is the LM head of a model with tied embeddings.
  return recording_ &&
         (record_output_ || (w.name() != "output.weight" && w.name() != "token_embd.weight"));
}

void ActivationRecorder::matmul(const kernels::Weight& w, kernels::Matrix x, kernels::Matrix y) {
  if (wanted(w)) {
    assert(inner_.host_memory());
    inner_.synchronize();
    quantize::ImatrixEntry& e = out_.entry(w.name(), w.cols(), 1);
    for (int64_t r = 0; r < x.rows; ++r) add_squares(x.data + r * x.stride, x.cols, e.sum2.data());
    e.counts[0] += static_cast<double>(x.rows);
  }
  inner_.matmul(w, x, y);
}

void ActivationRecorder::matmul_experts(const kernels::Weight& w, kernels::Matrix x,
                                        kernels::IndexMatrix ids, kernels::Matrix y) {
  if (wanted(w)) {
    assert(inner_.host_memory());
    inner_.synchronize();
    quantize::ImatrixEntry& e = out_.entry(w.name(), w.cols(), w.matrices());
    const int64_t n = ids.rows, k = ids.cols;
    const bool per_slot = x.rows == n * k;  // else one row per token, shared by its slots
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t s = 0; s < k; ++s) {
        const int32_t expert = ids.data[t * k + s];
        if (expert < 0 || expert >= w.matrices()) continue;
        const int64_t row = per_slot ? t * k + s : t;
        add_squares(x.data + row * x.stride, x.cols, e.sum2.data() + expert * e.cols);
        e.counts[static_cast<size_t>(expert)] += 1.0;
      }
    }
  }
  inner_.matmul_experts(w, x, ids, y);
}

}  // namespace cadenza::eval
