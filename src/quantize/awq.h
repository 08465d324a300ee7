// Activation-aware per-channel scaling (AWQ, Lin et al. 2023) on top of the importance matrix, for
// `cadenza quantize --imatrix FILE --awq`. docs/quantize.md has the math and its limits.
//
// A matmul y = W x with x = D u (D diagonal, the element-wise weight of an RMSNorm, or the rows of
// the matrix that produces x) is unchanged when column j of W is multiplied by s_j and D_j is
// divided by s_j. Quantizing W diag(s) instead of W moves rounding resolution towards the
// channels with large activations. Per group of matrices that share one input (a "fold point"),
// s_j = (E[x_j^2])^(alpha/2) from the imatrix, normalised so that max(s) * min(s) = 1, and alpha
// is chosen on a grid by the importance-weighted reconstruction error of the group's matrices
// quantized to the types they will get:
//   err(alpha) = sum_matrices sum_rows sum_j E[x_j^2] (w_j - Q(w diag(s))_j / s_j)^2.
// alpha = 0 (no scaling) is on the grid, so the chosen scales never lose on that measure.
//
// Fold points of the llama decoder (architectures llama, qwen2, qwen3), per layer:
//   attn_q/k/v  <- attn_norm                 (one scale for the three: they share the norm)
//   ffn_gate/up <- ffn_norm                  (skipped in MoE layers: the router reads it too)
//   ffn_down    <- the rows of ffn_up        (its input is act(gate x) * (up x), linear in up)
//   attn_output <- the rows of attn_v (+ its bias): its input is attention over V, head by head;
//                  the query heads that share a KV head (GQA) share its scales
// Only tensor values change: the output is an ordinary GGUF file, and in full precision the
// folded model computes what the original did (up to float rounding).
//
// Thread-safety: plan_awq uses the pool it is given; the results are plain data.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quantize/imatrix.h"
#include "tensor/dtype.h"
#include "util/result.h"
#include "util/thread_pool.h"

namespace cadenza::quantize {

struct AwqOptions {
  bool enabled = false;
  // A fixed alpha in [0, 1] for every group instead of the search (--awq-alpha).
  std::optional<float> alpha;
  int grid_steps = 20;         // the search tries alpha = 0, 1/steps, ..., 1
  int64_t search_rows = 512;   // rows per matrix the search quantizes (evenly spaced; all if fewer)
};

// Factors for one tensor: element (c, r) (c < shape[0], the column; r the row over all of the
// tensor's rows) is multiplied by cols[c] * rows[r]. Empty: 1. A 1-D tensor (a norm, a bias) has
// only columns.
struct TensorScale {
  std::vector<float> cols, rows;
};

struct AwqGroup {
  std::string name;        // "blk.3.attn_in", "blk.3.ffn_in", "blk.3.ffn_down", "blk.3.attn_out"
  float alpha = 0;
  double error_plain = 0;  // err(0), over the searched rows
  double error = 0;        // err(alpha)
};

struct AwqPlan {
  std::map<std::string, TensorScale> tensors;  // by tensor name: only the tensors that change
  std::vector<AwqGroup> groups;
  std::vector<std::string> skipped;  // fold points left plain, each with the reason
};

// The architectures whose fold points are known.
bool awq_supports(const std::string& architecture);

// The scales for `model` (its architecture from general.architecture). type_of: the type each
// tensor will be encoded to (only asked about the groups' matrices). Errors: an architecture
// whose fold points are not known, an alpha outside [0, 1]. A group whose tensors or imatrix
// entries are missing is left plain and named in `skipped`.
Result<AwqPlan> plan_awq(const gguf::GgufFile& model, const Imatrix& imatrix, const AwqOptions& options,
                         const std::map<std::string, DType>& type_of, ThreadPool& pool);

// Applies `scale` to row r of a tensor (row length n) in place.
void scale_row(const TensorScale& scale, int64_t r, float* row, int64_t n);
// The importance of the scaled tensor's columns: importance[c] / cols[c]^2 (in place).
void scale_importance(const TensorScale& scale, std::vector<float>& importance);

}  // namespace cadenza::quantize
