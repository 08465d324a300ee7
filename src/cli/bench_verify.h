// `cadenza bench --verify-curve`: the cost of one forward step in which every one of c sequences
// computes P new positions with logits for all of them (what verifying P-1 speculative drafts plus
// the real next token costs), against P = 1 (plain decoding). It calls Model::forward directly over
// a KvCache with hand-made block tables, as the engine does, so the numbers are the model's cost
// alone: no scheduler, sampler or proposer. The curve bounds what any proposer can gain: a step
// that emits on average T tokens is faster than plain decoding only if its P positions cost less
// than T times one (docs/speculative.md, "Verify cost").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/model.h"
#include "tensor/dtype.h"
#include "util/result.h"

namespace cadenza::cli {

// Parses a list of integers such as "1-8", "1,8" or "1,2,4-6" (ranges inclusive, spaces not
// allowed) into sorted, distinct values. Errors name `option`: an empty list or item, something
// that is not a number, a range whose end is below its start, a value outside [lo, hi].
Result<std::vector<int32_t>> parse_int_list(std::string_view option, std::string_view text,
                                            int32_t lo, int32_t hi);

// The ranges the options accept (checked by parse_verify_options).
inline constexpr int32_t kMaxVerifyPositions = 32;   // P: at most 32 positions per sequence
inline constexpr int32_t kMaxVerifySequences = 256;  // c

struct VerifyCurveArgs {
  std::vector<int32_t> positions = {1, 2, 3, 4, 5, 6, 7, 8};  // P values, sorted, distinct, >= 1
  std::vector<int32_t> sequences = {1, 8};                    // c values, sorted, distinct, >= 1
  int32_t depth = 512;   // tokens of context already in the cache of every sequence (>= 0)
  int repetitions = 5;   // timed steps per (c, P), >= 1
  int warmup = 1;        // untimed steps per (c, P) before them, >= 0
  DType kv_type = DType::F16;
  bool json = false;
  // The most bytes the logits of one step (c x P rows of n_vocab floats) may take, on the host and
  // in the backend's scratch: a larger c x P is a usage error instead of a run out of memory.
  int64_t max_logit_bytes = int64_t{4} << 30;
  // For the report's header only.
  std::string model_path;
  std::string kv_type_name = "f16";  // --kv-cache-type's spelling of kv_type
  int threads = 0;
};

// Parses --verify-positions and --verify-batch (parse_int_list with [1, kMaxVerifyPositions] and
// [1, kMaxVerifySequences]) and checks --depth >= 0 into `args`. P = 1 is added to the positions
// when missing: the ratios are to it. Errors are usage errors that name the option.
Status parse_verify_options(std::string_view positions, std::string_view sequences, int32_t depth,
                            VerifyCurveArgs& args);

// Measures the curve on `model` (a loaded driver or single-process model; nothing else may run a
// forward pass on it meanwhile) and prints it on stdout: a table, or JSON with args.json.
// For each c: c sequences get `depth` random tokens of context (prefilled once, untimed); then
// `warmup` + `repetitions` rounds each run one step per P (the P values take turns, so that a
// change of machine load hits them alike), a step computing positions depth..depth+P-1 of every
// sequence, all with logits, overwriting the same KV slots each time so the depth stays fixed.
// Each point reports the wall time of a step (median, min, max), its ratio to P = 1, c * P / the
// median as tokens/s, and the process's CPU time per step (median, min) with its ratio to P = 1:
// on a machine shared with other jobs the wall time includes waiting for a core, CPU time not.
// Returns the exit code: 2 on a usage error (on stderr): depth + the largest P exceeds the model's
// context length, or the largest c x P rows of logits exceed max_logit_bytes; 1 on a model error
// (on stderr, e.g. no memory for the KV cache); 0 otherwise.
int run_verify_curve(model::Model& model, const VerifyCurveArgs& args);

}  // namespace cadenza::cli
