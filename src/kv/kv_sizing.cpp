#include "kv/kv_sizing.h"

#include <algorithm>
#include <limits>

namespace cadenza::kv {

Result<int64_t> kv_row_bytes(KvElementType type, int64_t n) {
  if (n <= 0) return make_error("kv sizing: row of {} values", n);
  switch (type) {
    case KvElementType::kF32: return n * 4;
    case KvElementType::kF16: return n * 2;
    case KvElementType::kQ8_0:
      // A Q8_0 block never straddles two heads: each head row is quantized on its own.
      if (n % 32 != 0) return make_error("kv sizing: Q8_0 needs head dims divisible by 32, got {}", n);
      return n / 32 * 34;
  }
  return make_error("kv sizing: unknown element type");
}

Result<int64_t> kv_bytes_per_token(const KvShape& shape) {
  if (shape.n_layers <= 0 || shape.n_kv_heads <= 0) {
    return make_error("kv sizing: {} layers, {} kv heads", shape.n_layers, shape.n_kv_heads);
  }
  Result<int64_t> k = kv_row_bytes(shape.type, shape.head_dim_k);
  if (!k) return k.error_value();
  Result<int64_t> v = kv_row_bytes(shape.type, shape.head_dim_v);
  if (!v) return v.error_value();
  // Realistic shapes are far below 2^63; the products here stay below 2^40.
  return shape.n_layers * shape.n_kv_heads * (*k + (shape.values_in_keys ? 0 : *v));
}

Result<int64_t> kv_bytes_per_block(const KvShape& shape) {
  if (shape.block_size <= 0) return make_error("kv sizing: block size {}", shape.block_size);
  Result<int64_t> t = kv_bytes_per_token(shape);
  if (!t) return t;
  return *t * shape.block_size;
}

Result<int32_t> kv_num_blocks_for_budget(const KvShape& shape, int64_t budget_bytes) {
  if (budget_bytes < 0) return make_error("kv sizing: negative budget {}", budget_bytes);
  Result<int64_t> b = kv_bytes_per_block(shape);
  if (!b) return b.error_value();
  const int64_t n = budget_bytes / *b;
  return static_cast<int32_t>(std::min<int64_t>(n, std::numeric_limits<int32_t>::max()));
}

Result<int64_t> kv_sequences_for_budget(const KvShape& shape, int64_t budget_bytes,
                                        int64_t tokens_per_sequence) {
  if (tokens_per_sequence < 1) return make_error("kv sizing: sequences of {} tokens", tokens_per_sequence);
  Result<int32_t> blocks = kv_num_blocks_for_budget(shape, budget_bytes);
  if (!blocks) return blocks.error_value();
  const int64_t per_sequence = (tokens_per_sequence + shape.block_size - 1) / shape.block_size;
  return *blocks / per_sequence;
}

int32_t kv_window_blocks(int64_t window, int64_t block_size, int64_t max_num_seqs,
                         int64_t max_num_batched_tokens, int64_t cap) {
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const int64_t per_seq = ceil_div(window - 1, block_size) + 2;
  const int64_t n = max_num_seqs * per_seq + ceil_div(max_num_batched_tokens, block_size);
  return static_cast<int32_t>(std::min<int64_t>({n, cap, std::numeric_limits<int32_t>::max()}));
}

}  // namespace cadenza::kv
