// The hybrid families at the Model level, each on its small preset (qwen35: Gated DeltaNet
// layers; granitehybrid: Mamba-2 layers; 2 recurrent layers and 1 attention layer each): the
// recurrent layers' batch contract is checked with clear errors (state slots out of range or
// shared, a sequence's positions not consecutive), state slots are independent (two sequences in
// one batch, each in its own slot, equal each alone), a state copied to another slot continues
// identically, and the KV cache's state errors. The numerics against the reference:
// family_golden_test.cpp (qwen35-small.json, granitehybrid-small.json).
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/session.h"
#include "synth/synth.h"
#include "temp_dir.h"

namespace cadenza::model {
namespace {

class HybridTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    static test::TempDir dir("hybrid-test");
    const std::string path = (dir.path() / (GetParam() + ".gguf")).string();
    if (!std::filesystem::exists(path)) {
      synth::SynthOptions opts;
      opts.shape = *synth::find_preset(GetParam());
      opts.shape.n_vocab = 256;
      opts.shape.n_layer = 3;
      opts.weight_type = "f32";
      opts.seed = 11;
      ASSERT_TRUE(synth::write_synthetic_model(opts, path).ok());
    }
    backend_ = kernels::make_cpu_backend({.n_threads = 2});
    auto m = Model::open(path, *backend_);
    ASSERT_TRUE(m.ok()) << m.error();
    model_ = std::move(*m);
    ASSERT_TRUE(model_->config().hybrid());
    auto kv = model_->create_kv_cache({.num_blocks = 16, .block_size = 16, .num_state_slots = 4});
    ASSERT_TRUE(kv.ok()) << kv.error();
    kv_ = std::move(*kv);
  }
  // Runs tokens [0, n) of `tokens` at positions start.. for one sequence in `slot` with block
  // table `table`; returns the last token's logits.
  Result<std::vector<float>> run(const std::vector<int32_t>& tokens, int32_t start, int32_t slot,
                                 const std::vector<int32_t>& table) {
    std::vector<int32_t> pos, seq(tokens.size(), 0);
    for (size_t i = 0; i < tokens.size(); ++i) pos.push_back(start + static_cast<int32_t>(i));
    const std::span<const int32_t> tables[] = {table};
    const int32_t rows[] = {static_cast<int32_t>(tokens.size()) - 1};
    const int32_t slots[] = {slot};
    std::vector<float> logits(static_cast<size_t>(model_->config().n_vocab));
    Status st = model_->forward({tokens, pos, seq, tables, rows, slots}, *kv_, logits);
    if (!st) return st.error_value();
    return logits;
  }
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvCache> kv_;
};

TEST_P(HybridTest, BadRecurrentBatchesAreClearErrors) {
  const std::vector<int32_t> tokens = {1, 2, 3};
  Result<std::vector<float>> r = run(tokens, 0, 4, {0});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("state slot 4"), std::string::npos) << r.error();
  // Two sequences in one slot.
  const std::vector<int32_t> tok = {1, 2}, pos = {0, 0}, seq = {0, 1}, rows = {0, 1};
  const std::vector<int32_t> t0 = {0}, t1 = {1};
  const std::span<const int32_t> tables[] = {t0, t1};
  const int32_t same[] = {2, 2};
  std::vector<float> logits(2 * static_cast<size_t>(model_->config().n_vocab));
  Status st = model_->forward({tok, pos, seq, tables, rows, same}, *kv_, logits);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("share a state slot"), std::string::npos) << st.error();
  // Positions of one sequence out of order.
  const std::vector<int32_t> p2 = {1, 0}, s2 = {0, 0};
  const std::span<const int32_t> one[] = {t0};
  st = model_->forward({tok, p2, s2, one, {rows.data(), 1}}, *kv_, {logits.data(), logits.size() / 2});
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("consecutive"), std::string::npos) << st.error();
  // Slot count in range of the Batch's sequences.
  const int32_t too_few[] = {0};
  st = model_->forward({tok, pos, seq, tables, rows, too_few}, *kv_, logits);
  ASSERT_FALSE(st);
  EXPECT_FALSE(kv_->copy_state(0, 4));
  EXPECT_FALSE(kv_->copy_state(-1, 0));
}

TEST_P(HybridTest, SlotsAreIndependentAndACopiedStateContinuesTheSame) {
  const std::vector<int32_t> a = {5, 17, 42, 7, 99, 3}, b = {8, 8, 200, 1};
  // a alone in slot 0, b alone in slot 1; then a again in slot 3 after b ran: the same logits.
  auto la = run(a, 0, 0, {0});
  auto lb = run(b, 0, 1, {1});
  auto la3 = run(a, 0, 3, {2});
  ASSERT_TRUE(la.ok() && lb.ok() && la3.ok());
  EXPECT_EQ(*la, *la3);
  EXPECT_NE(*la, *lb);
  // Continue a in slot 0 by one token; a copy of slot 0's state taken before, in slot 2 with a
  // copied block, continues to the same logits.
  ASSERT_TRUE(kv_->copy_state(0, 2));
  ASSERT_TRUE(kv_->copy_block(0, 3, static_cast<int32_t>(a.size())));
  auto next = run({61}, static_cast<int32_t>(a.size()), 0, {0});
  auto forked = run({61}, static_cast<int32_t>(a.size()), 2, {3});
  ASSERT_TRUE(next.ok() && forked.ok());
  EXPECT_EQ(*next, *forked);
  // And in chunks: a as 4 + 2 tokens gives a's logits.
  ASSERT_TRUE(run({a.begin(), a.begin() + 4}, 0, 1, {1}).ok());
  auto chunked = run({a.begin() + 4, a.end()}, 4, 1, {1});
  ASSERT_TRUE(chunked.ok());
  EXPECT_EQ(*chunked, *la);
}

TEST_P(HybridTest, SessionRewindsOnlyToTheStart) {
  auto session = Session::create(*model_, {.max_tokens = 64});
  ASSERT_TRUE(session.ok()) << session.error();
  const std::vector<int32_t> a = {5, 17, 42, 7};
  auto first = (*session)->eval(a);
  ASSERT_TRUE(first.ok()) << first.error();
  Status st = (*session)->rewind(2);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().find("rewind only to 0"), std::string::npos) << st.error();
  ASSERT_TRUE((*session)->rewind(0));
  auto again = (*session)->eval(a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*first, *again);
  // One sequence, one recurrent-state slot (the cache's default of 8 cost Qwen3.5-0.8B ~130 MiB
  // of never-used state in `cadenza run` and `bench`).
  EXPECT_EQ((*session)->kv().num_state_slots(), 1);
}

INSTANTIATE_TEST_SUITE_P(Presets, HybridTest,
                         testing::Values("qwen35-small", "granitehybrid-small",
                                         "granitehybrid-moe-small"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return name;
                         });

}  // namespace
}  // namespace cadenza::model
