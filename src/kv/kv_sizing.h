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

// The window group (KvCacheConfig::num_window_blocks) that lets `max_num_seqs` sequences run at
// once without running out of window blocks: a sequence computing positions [s, s + n) holds
// the blocks of positions max(0, s - window + 1) .. s + n - 1, at most
// ceil((window - 1) / block_size) + ceil(n / block_size) + 1 blocks, and the n of one step sum
// to at most max_num_batched_tokens. So max_num_seqs * (ceil((window - 1) / block_size) + 2)
// + ceil(max_num_batched_tokens / block_size) blocks (at least one sequence's worth), capped at
// `cap` (the main pool: a window group never needs more). Arguments must be positive.
int32_t kv_window_blocks(int64_t window, int64_t block_size, int64_t max_num_seqs,
                         int64_t max_num_batched_tokens, int64_t cap);

}  // namespace cadenza::kv
