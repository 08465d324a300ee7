// Quantizing a GGUF model into another: every tensor's type from quantize/mixture.h, the metadata
// copied (general.file_type set to the target's, general.quantization_version 2), rows converted
// on a thread pool, one tensor in memory at a time and the input's pages released once read, so a
// model larger than memory converts (the input is memory-mapped; the output streams to disk).
//
// Input tensors of any type we can decode: F32/F16/BF16 directly, a quantized input is decoded
// and quantized again (worse than from the original floats; the summary says so). Errors, all
// returned: an unreadable or damaged input, a non-finite value (named by tensor and row), an
// output that cannot be written (the partial file is removed), an imatrix that cannot be read or
// that was made for another model (a tensor's row length or expert count differs, or no tensor
// of the model is in it), --awq without an imatrix or for an architecture whose fold points are
// not known (quantize/awq.h). A quantized tensor the imatrix lacks is encoded without it (a warning
// names how many).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "quantize/awq.h"
#include "quantize/mixture.h"
#include "util/result.h"

namespace cadenza::quantize {

struct Options {
  std::string input, output;
  Target target;
  Overrides overrides;
  int threads = 1;
  bool plan_only = false;  // choose the types and report them; write nothing (--dry-run)
  // An importance matrix (quantize/imatrix.h) to weight each tensor's rounding error by its
  // input channels' mean squared activations (--imatrix FILE); empty: none.
  std::string imatrix;
  // Activation-aware per-channel scales folded into the norms and producing matrices before
  // encoding (quantize/awq.h; --awq, needs the imatrix). Not run for plan_only.
  AwqOptions awq;
  // Called after each tensor (done, total bytes of the input's tensors), on the calling thread.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct TensorReport {
  std::string name;
  DType from, to;
  bool fallback = false;  // the rule's type did not fit the row (see mixture.h)
  DType wanted = DType::F32;
  uint64_t bytes_in = 0, bytes_out = 0;
  bool weighted = false;  // encoded with the imatrix's importance (quant.h quantize_row_weighted)
};

struct Summary {
  std::vector<TensorReport> tensors;
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor data
  uint64_t file_bytes = 0;               // the output file
  int64_t n_elements = 0;                // of all tensors
  int requantized = 0;                   // tensors decoded from a quantized input type
  int weighted = 0;                      // tensors encoded with the imatrix's importance
  std::vector<AwqGroup> awq_groups;      // --awq: each fold point's alpha (0: left unscaled)
  std::vector<std::string> awq_skipped;  // --awq: fold points left plain, with the reason
  double seconds = 0;
  // Bits per weight of the output's tensor data.
  double bits_per_weight() const {
    return n_elements > 0 ? 8.0 * static_cast<double>(bytes_out) / static_cast<double>(n_elements) : 0;
  }
};

Result<Summary> quantize_model(const Options& options);

}  // namespace cadenza::quantize
