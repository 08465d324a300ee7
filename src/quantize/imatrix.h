// The importance matrix ("imatrix"): per weight matrix, the sum over calibration tokens of the
// square of each input channel's activation, and how many tokens were summed. Quantizing a row
// w of that matrix to w' changes a token's output by sum_i a_i (w_i - w'_i); averaged over
// tokens, with channels taken as uncorrelated, the squared change is
//   sum_i E[a_i^2] (w_i - w'_i)^2,
// so E[a_i^2] = in_sum2[i] / count is the weight of column i's rounding error (quant.h
// quantize_row_weighted). `cadenza imatrix` makes one (eval/activation_recorder.h), `cadenza
// quantize --imatrix` uses it.
//
// File format (the GGUF imatrix format other GGUF tools read and write): a GGUF file with
// general.type = "imatrix", imatrix.datasets (array of strings: the calibration files),
// imatrix.chunk_count and imatrix.chunk_size (u32), and for each tensor NAME that was observed two
// f32 tensors: NAME.in_sum2 of shape [cols, matrices] (ggml order: the per-channel sums, one row
// per matrix; matrices > 1 for the experts of a mixture-of-experts tensor) and NAME.counts of
// shape [1, matrices] (tokens summed per matrix; an expert that saw no token has count 0).
//
// Not thread-safe; plain data.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/result.h"

namespace cadenza::quantize {

struct ImatrixEntry {
  int64_t cols = 0;      // input channels (the weight's row length)
  int64_t matrices = 1;  // 1, or the expert count
  std::vector<double> sum2;    // [matrices][cols]
  std::vector<double> counts;  // [matrices]
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight tensor name ("blk.0.attn_q.weight")
  std::vector<std::string> datasets;            // calibration files
  int64_t chunk_count = 0;
  int64_t chunk_size = 0;

  // The entry of `name`, created with zeros on first use; an existing entry's shape must match
  // (a programming error otherwise).
  ImatrixEntry& entry(const std::string& name, int64_t cols, int64_t matrices);
  // Mean squared activation per column of matrix m of `name` (sum2 / count) into `out` (cols
  // values): false when the tensor is absent or matrix m saw no token.
  bool importance(const std::string& name, int64_t m, std::vector<float>& out) const;
};

// Errors: the file cannot be written.
Status write_imatrix(const Imatrix& imatrix, const std::string& path);
// Errors: not a GGUF file (the older headerless .dat format is named in the message), not an
// imatrix (general.type), a tensor without its partner or with a wrong shape or type, a
// negative or non-finite value.
Result<Imatrix> read_imatrix(const std::string& path);

}  // namespace cadenza::quantize
