// Which type each tensor of a model gets when it is quantized: the targets `cadenza quantize`
// takes (a plain type, or one of the usual K-quant mixtures) and the per-tensor rules of a
// mixture, plus the user's overrides. Pure functions of names and shapes; no I/O.
//
// Rules (docs/quantize.md has the table). A tensor is quantized when it is a matrix (2 or 3
// dimensions) other than the MoE router (`ffn_gate_inp`): vectors (norms, biases, sinks) and
// the router stay as they are in the input (f32 in practice). For a matrix, in order:
//  1. the first --tensor-type PATTERN=TYPE whose regular expression matches the name
//     (std::regex, ECMAScript, search anywhere in the name);
//  2. `output.weight` (and `token_embd.weight` of a model without one, which serves as the
//     output): --output-tensor-type, else the target's output type;
//  3. `token_embd.weight`: --token-embedding-type, else the target's embedding type;
//  4. unless --pure: the mixture's rule for attn_v / ffn_down (dense, experts and shared
//     experts) / attn_output by layer;
//  5. the target's base type.
// A row length that is not a multiple of the chosen type's block falls back the way the reference
// quantizer's files do (q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0, iq4_xs -> iq4_nl, q2_K, q3_K
// and the IQ grid types -> q4_0; f16 for a row that is not a multiple of 32), and the choice
// says so (`fallback`).
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"
#include "util/result.h"

namespace cadenza::quantize {

// A quantization target: "q4_k_m", "q8_0", "iq4_xs", ...
struct Target {
  std::string name;      // lower case, as given
  DType base;            // the type of most matrices
  uint32_t file_type;    // general.file_type as the reference numbers its files (LLAMA_FTYPE_*)
  enum class Mix : uint8_t { kNone, kQ2K, kQ3KS, kQ3KM, kQ3KL, kQ4KS, kQ4KM, kQ5KS, kQ5KM } mix = Mix::kNone;
};

// Every name parse_target accepts, in the order of `cadenza quantize --help`.
const std::vector<std::string>& target_names();
// The target of a name (case-insensitive); an error listing the known names otherwise.
Result<Target> parse_target(std::string_view name);

// The user's overrides (cadenza quantize's options).
struct Overrides {
  struct Pattern {
    std::string text;
    std::regex re;
    DType type;
  };
  std::vector<Pattern> tensor_types;          // --tensor-type, in order
  std::optional<DType> output_type;           // --output-tensor-type
  std::optional<DType> token_embedding_type;  // --token-embedding-type
  bool pure = false;                          // --pure
};
// Parses one --tensor-type "PATTERN=TYPE" (the last '=' splits).
Result<Overrides::Pattern> parse_tensor_type(const std::string& spec);

// The model facts the rules need.
struct ModelFacts {
  int64_t n_layers = 0;     // <arch>.block_count
  bool has_output = false;  // an `output.weight` exists (else token_embd is the output)
};

struct Choice {
  DType type;
  bool quantized = false;     // false: copied as it is (vectors, the router)
  bool fallback = false;      // the rule's type did not fit the row: `type` is the fallback
  DType wanted = DType::F32;  // the rule's type, before a fallback
};

// The type of tensor `name` (shape in ggml order: shape[0] is the row length).
Choice choose(const Target& target, const Overrides& overrides, const ModelFacts& facts,
              const std::string& name, const std::vector<int64_t>& shape, DType input_type);

// The reference quantizer's fallback for a row of `row` elements that `t`'s block does not divide.
DType fit_row(DType t, int64_t row);
// Whether layer i of n gets the extra bits of the *_M mixtures: the first and last eighth, and
// every third layer in between.
bool use_more_bits(int64_t i, int64_t n);

}  // namespace cadenza::quantize
