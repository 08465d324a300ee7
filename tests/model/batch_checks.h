// Batch-invariance checks shared by the model tests: a sequence's logits through a Session in
// steps of a given size, bitwise comparison, and a ragged batch of two interleaved sequences with
// scattered block tables against each alone.
#pragma once

#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "model/model.h"
#include "model/session.h"

namespace cadenza::test {

using model::Batch;
using model::KvCache;
using model::KvCacheOptions;
using model::Model;
using model::Session;
using model::SessionOptions;

inline std::vector<int32_t> some_tokens(size_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

inline std::vector<float> eval_all(Model& model, std::span<const int32_t> tokens, int32_t max_batch_tokens,
                            int32_t block_size = 16) {
  SessionOptions options;
  options.max_tokens = static_cast<int32_t>(tokens.size());
  options.max_batch_tokens = max_batch_tokens;
  options.block_size = block_size;
  Result<std::unique_ptr<Session>> session = Session::create(model, options);
  EXPECT_TRUE(session) << session.error();
  Result<std::vector<float>> logits = (*session)->eval_all(tokens);
  EXPECT_TRUE(logits) << logits.error();
  return logits ? *logits : std::vector<float>();
}

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Two sequences interleaved in one ragged batch, with scattered block tables, over two steps
// (a prompt chunk, then the rest mixed with the other's prompt), give the same logits as each
// sequence alone.
inline void check_ragged_batch(Model& model, const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const int64_t vocab = model.config().n_vocab;
  const std::vector<float> a_alone = eval_all(model, a, 512);
  const std::vector<float> b_alone = eval_all(model, b, 512);

  KvCacheOptions kv_options;
  kv_options.block_size = 4;
  kv_options.num_blocks = static_cast<int32_t>((a.size() + 3) / 4 + (b.size() + 3) / 4 + 3);
  Result<std::unique_ptr<KvCache>> kv = model.create_kv_cache(kv_options);
  ASSERT_TRUE(kv) << kv.error();
  // Hand out blocks from the end, alternating between the sequences.
  std::vector<int32_t> table_a, table_b;
  int32_t next_block = kv_options.num_blocks - 1;
  while (table_a.size() * 4 < a.size() || table_b.size() * 4 < b.size()) {
    if (table_a.size() * 4 < a.size()) table_a.push_back(next_block--);
    if (table_b.size() * 4 < b.size()) table_b.push_back(next_block--);
  }
  const std::vector<std::span<const int32_t>> tables = {table_a, table_b};

  std::vector<float> a_batched(a.size() * vocab), b_batched(b.size() * vocab);
  // Step 1: a[0, split_a) and b[0, split_b); step 2: the rest. Tokens interleaved.
  const size_t split_a = a.size() / 2 + 1, split_b = b.size() / 3;
  for (int step = 0; step < 2; ++step) {
    std::vector<int32_t> tokens, positions, seq, rows;
    std::vector<float*> destinations;
    const size_t a_begin = step == 0 ? 0 : split_a, a_end = step == 0 ? split_a : a.size();
    const size_t b_begin = step == 0 ? 0 : split_b, b_end = step == 0 ? split_b : b.size();
    for (size_t i = 0; a_begin + i < a_end || b_begin + i < b_end; ++i) {
      if (b_begin + i < b_end) {
        tokens.push_back(b[b_begin + i]);
        positions.push_back(static_cast<int32_t>(b_begin + i));
        seq.push_back(1);
        destinations.push_back(b_batched.data() + (b_begin + i) * vocab);
      }
      if (a_begin + i < a_end) {
        tokens.push_back(a[a_begin + i]);
        positions.push_back(static_cast<int32_t>(a_begin + i));
        seq.push_back(0);
        destinations.push_back(a_batched.data() + (a_begin + i) * vocab);
      }
    }
    rows.resize(tokens.size());
    std::iota(rows.begin(), rows.end(), 0);
    std::vector<float> logits(rows.size() * vocab);
    Batch batch{tokens, positions, seq, tables, rows};
    Status st = model.forward(batch, **kv, logits);
    ASSERT_TRUE(st) << st.error();
    for (size_t r = 0; r < rows.size(); ++r) {
      std::memcpy(destinations[r], logits.data() + r * vocab, vocab * sizeof(float));
    }
  }
  EXPECT_TRUE(bitwise_equal(a_alone, a_batched));
  EXPECT_TRUE(bitwise_equal(b_alone, b_batched));
}

}  // namespace cadenza::test
