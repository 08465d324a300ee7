// KV memory arithmetic: bytes per block for a model shape, and how many blocks fit a budget
// (so that `--kv-cache-memory` can be honoured). Mirrors model::KvCache's layout: per layer, per
// token slot, n_kv_heads rows of head_dim_k key elements and n_kv_heads rows of head_dim_v value
// elements. Kept free of model/tensor headers so the scheduler side can size without a backend.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "util/result.h"

namespace cadenza::kv {

enum class KvElementType {
  kF32,   // 4 bytes per value
  kF16,   // 2 bytes per value
  kQ8_0,  // blocks of 32 values: one f16 scale + 32 int8 = 34 bytes; rows must be multiples of 32
};

struct KvShape {
  int64_t n_layers = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  KvElementType type = KvElementType::kF16;
  int64_t block_size = 16;  // tokens per block
  // The compressed cache of multi-head latent attention: values are the first head_dim_v
  // elements of each key row, so only keys take memory.
  bool values_in_keys = false;
};

// Bytes of one row of `n` values (one head of one token). Error for Q8_0 rows not a multiple of 32.
Result<int64_t> kv_row_bytes(KvElementType type, int64_t n);

// Bytes one token occupies across all layers (keys + values).
Result<int64_t> kv_bytes_per_token(const KvShape& shape);

// Bytes one block occupies across all layers: bytes_per_token * block_size.
Result<int64_t> kv_bytes_per_block(const KvShape& shape);

// How many whole blocks fit in `budget_bytes` (0 when not even one does), capped at INT32_MAX
// because block ids are int32.
Result<int32_t> kv_num_blocks_for_budget(const KvShape& shape, int64_t budget_bytes);

// How many sequences of `tokens_per_sequence` tokens each fit in `budget_bytes` with paging: the
// budget's blocks over the ceil(tokens / block_size) blocks one sequence needs (no prefix
// sharing). Errors: a bad shape, a negative budget, tokens_per_sequence < 1.
Result<int64_t> kv_sequences_for_budget(const KvShape& shape, int64_t budget_bytes,
                                        int64_t tokens_per_sequence);

}  // namespace cadenza::kv
