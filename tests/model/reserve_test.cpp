// Model::reserve: scratch is shaped once for the largest step; a batch beyond the reservation is a
// clear error (never a reallocation in the pass); the reservation only grows; Session reserves what
// its steps need, so normal runs never hit the limit.
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/session.h"
#include "synthetic_model.h"

namespace cadenza::model {
namespace {

using test::make_synthetic;
using test::SyntheticSpec;

constexpr int32_t kBlockSize = 4;

std::vector<int32_t> some_tokens(size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 13 + 7) % 64);
  return t;
}

// One step of `n_seqs` sequences over `kv` (sequence s uses blocks s*8 .. s*8+7): sequence s gets
// tokens at positions first_position ..; `logit_rows` rows are requested (rows 0..).
struct Step {
  std::vector<int32_t> tokens, positions, seq_index, rows;
  std::vector<std::vector<int32_t>> tables;
  std::vector<std::span<const int32_t>> table_spans;
  std::vector<float> logits;

  Step(size_t n_tokens, size_t n_seqs, size_t logit_rows, int32_t first_position = 0) {
    tokens = some_tokens(n_tokens);
    for (size_t t = 0; t < n_tokens; ++t) {
      seq_index.push_back(static_cast<int32_t>(t % n_seqs));
      positions.push_back(first_position + static_cast<int32_t>(t / n_seqs));
    }
    for (size_t s = 0; s < n_seqs; ++s) {
      std::vector<int32_t> table(8);
      std::iota(table.begin(), table.end(), static_cast<int32_t>(s * 8));
      tables.push_back(std::move(table));
    }
    for (const auto& table : tables) table_spans.emplace_back(table);
    rows.resize(logit_rows);
    std::iota(rows.begin(), rows.end(), 0);
    logits.resize(logit_rows * 64);
  }
  Status run(Model& model, KvCache& kv) {
    return model.forward(Batch{tokens, positions, seq_index, table_spans, rows}, kv, logits);
  }
};

struct Fixture {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend({.n_threads = 2});
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> kv;

  explicit Fixture(const StepCapacity& capacity) {
    auto m = Model::load(make_synthetic(SyntheticSpec{}), *backend, {.capacity = capacity});
    EXPECT_TRUE(m) << m.error();
    if (!m) return;
    model = std::move(*m);
    auto k = model->create_kv_cache({.num_blocks = 32, .block_size = kBlockSize});
    EXPECT_TRUE(k) << k.error();
    if (k) kv = std::move(*k);
  }
};

void expect_error(Status st, const std::string& needle) {
  ASSERT_FALSE(st) << "expected an error containing '" << needle << "'";
  EXPECT_NE(st.error().find(needle), std::string::npos) << st.error();
  EXPECT_NE(st.error().find("Model::reserve"), std::string::npos) << st.error();
}

TEST(Reserve, ABatchBeyondTheReservationIsAClearError) {
  Fixture f({.max_tokens = 8, .max_logit_rows = 2, .max_sequences = 2, .max_blocks_per_sequence = 4});
  ASSERT_TRUE(f.model && f.kv);
  EXPECT_EQ(f.model->capacity().max_tokens, 8);

  Step fits(8, 2, 2);
  ASSERT_TRUE(fits.run(*f.model, *f.kv));

  Step too_many_tokens(9, 1, 1);
  expect_error(too_many_tokens.run(*f.model, *f.kv), "needs 9 tokens, more than the 8 reserved");
  Step too_many_rows(4, 1, 3);
  expect_error(too_many_rows.run(*f.model, *f.kv), "needs 3 logit rows, more than the 2 reserved");
  Step too_many_sequences(3, 3, 1);
  expect_error(too_many_sequences.run(*f.model, *f.kv), "needs 3 sequences");
  Step too_long(1, 1, 1, 4 * kBlockSize);  // position 16: block table entries 0..4
  expect_error(too_long.run(*f.model, *f.kv), "needs 5 blocks per sequence");

  // After a larger reservation the same batch runs, and computes what a Session computes.
  ASSERT_TRUE(f.model->reserve({.max_tokens = 9, .max_logit_rows = 9, .max_sequences = 1,
                                .max_blocks_per_sequence = 8}));
  Step nine(9, 1, 9);
  ASSERT_TRUE(nine.run(*f.model, *f.kv));
  auto session = Session::create(*f.model, {.max_tokens = 9, .block_size = kBlockSize});
  ASSERT_TRUE(session) << session.error();
  Result<std::vector<float>> expected = (*session)->eval_all(nine.tokens);
  ASSERT_TRUE(expected) << expected.error();
  ASSERT_EQ(expected->size(), nine.logits.size());
  EXPECT_EQ(0, std::memcmp(expected->data(), nine.logits.data(), nine.logits.size() * sizeof(float)));
}

TEST(Reserve, TheReservationOnlyGrowsAndRejectsNonsense) {
  Fixture f({.max_tokens = 32, .max_logit_rows = 4, .max_sequences = 2, .max_blocks_per_sequence = 8});
  ASSERT_TRUE(f.model);
  ASSERT_TRUE(f.model->reserve({.max_tokens = 4, .max_logit_rows = 8, .max_sequences = 1,
                                .max_blocks_per_sequence = 1}));
  const StepCapacity c = f.model->capacity();
  EXPECT_EQ(c.max_tokens, 32);  // kept
  EXPECT_EQ(c.max_logit_rows, 8);  // grown
  EXPECT_EQ(c.max_sequences, 2);
  EXPECT_EQ(c.max_blocks_per_sequence, 8);

  for (const StepCapacity& bad : {StepCapacity{0, 1, 1, 1}, StepCapacity{1, 0, 1, 1},
                                 StepCapacity{1, 1, -1, 1}, StepCapacity{int64_t{1} << 40, 1, 1, 1}}) {
    Status st = f.model->reserve(bad);
    ASSERT_FALSE(st);
    EXPECT_NE(st.error().find("cannot reserve"), std::string::npos) << st.error();
  }
  EXPECT_TRUE(f.model->capacity().covers(c) && c.covers(f.model->capacity()));  // unchanged

  // A load whose default reservation is nonsense fails cleanly too.
  std::unique_ptr<kernels::Backend> be = kernels::make_cpu_backend({.n_threads = 1});
  auto m = Model::load(make_synthetic(SyntheticSpec{}), *be, {.capacity = {0, 1, 1, 1}});
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().find("cannot reserve 0 tokens"), std::string::npos) << m.error();
}

TEST(Reserve, SessionsReserveWhatTheirStepsNeed) {
  // The smallest possible load reservation: everything a session runs must come from its own.
  Fixture tiny({1, 1, 1, 1});
  Fixture roomy({});
  ASSERT_TRUE(tiny.model && roomy.model);
  const std::vector<int32_t> prompt = some_tokens(100);
  std::vector<std::vector<float>> results;
  for (Model* m : {tiny.model.get(), roomy.model.get()}) {
    auto session = Session::create(*m, {.max_tokens = 160, .block_size = kBlockSize,
                                        .max_batch_tokens = 48});
    ASSERT_TRUE(session) << session.error();
    Result<std::vector<float>> last = (*session)->eval(prompt);  // 3 steps of <= 48 tokens
    ASSERT_TRUE(last) << last.error();
    Result<std::vector<float>> all = (*session)->eval_all(some_tokens(30));  // 30 logit rows
    ASSERT_TRUE(all) << all.error();
    last->insert(last->end(), all->begin(), all->end());
    results.push_back(*last);
  }
  EXPECT_EQ(tiny.model->capacity().max_tokens, 48);
  EXPECT_EQ(tiny.model->capacity().max_logit_rows, 30);
  EXPECT_EQ(tiny.model->capacity().max_blocks_per_sequence, 40);
  // The reservation changes no result.
  ASSERT_EQ(results[0].size(), results[1].size());
  EXPECT_EQ(0, std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)));
}

}  // namespace
}  // namespace cadenza::model
