// Tensor element types, numbered as in GGUF files (ggml_type), and their block layouts.
//
// A quantized row of n elements is n / block_size blocks of type_size bytes each; n must be a
// multiple of block_size. Block layouts are documented in tensor/blocks.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cadenza {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct DTypeTraits {
  std::string_view name;   // as llama.cpp prints it: "f32", "q4_K", ...
  int64_t block_size;      // elements per block (1 for plain types)
  size_t type_size;        // bytes per block
  bool compute_supported;  // we can dequantize (and quantize) it
};

// Traits of a known type; nullopt for ids that GGUF does not define. Use this to validate
// untrusted type ids read from files.
std::optional<DTypeTraits> dtype_traits(uint32_t id);

// Traits of a valid DType (asserts on unknown values).
const DTypeTraits& traits(DType t);
inline std::string_view dtype_name(DType t) { return traits(t).name; }
// Whether t stores blocks of quantized values (false for the plain F32/F16/BF16 types).
inline bool is_block_quantized(DType t) { return traits(t).block_size > 1; }

// Parses a type name ("q8_0", "Q4_K", "f16"; case-insensitive). nullopt when unknown.
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of a row of n elements; nullopt when n is not a multiple of the block size or the size
// overflows. Safe on untrusted n.
std::optional<uint64_t> row_bytes(DType t, int64_t n);

}  // namespace cadenza
