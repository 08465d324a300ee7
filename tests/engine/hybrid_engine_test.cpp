// The engine on a hybrid model (qwen35: Gated DeltaNet linear-attention layers with a recurrent
// state per sequence beside the attention layers' paged KV): concurrent requests with chunked
// prompts equal each alone, preemption (recompute) and n > 1 forks (the state copied) give the
// single run's outputs, prefix caching is off and speculation refused. A tiny qwen35-small
// shape written by the synthesizer (no ../shared needed).
#include <set>

#include "engine_test_util.h"

namespace cadenza::engine {
namespace {

using namespace test_util;

class HybridEngineTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    synth::SynthOptions opts;
    opts.shape = *synth::find_preset("qwen35-small");
    opts.shape.n_vocab = 300;
    opts.shape.n_layer = 3;  // two linear-attention layers, then one gated attention layer
    opts.weight_type = "f32";
    opts.seed = 5;
    path_ = (std::filesystem::temp_directory_path() /
             ("hybrid-engine-test-" + std::to_string(::getpid()) + ".gguf")).string();
    auto written = synth::write_synthetic_model(opts, path_);
    ASSERT_TRUE(written.ok()) << written.error();
    loaded_ = load(path_).release();
  }
  static void TearDownTestSuite() {
    delete loaded_;
    loaded_ = nullptr;
    std::filesystem::remove(path_);
  }
  void SetUp() override {
    ASSERT_NE(loaded_, nullptr);
    ASSERT_TRUE(loaded_->model->config().hybrid());
  }
  static std::unique_ptr<EngineCore> engine(EngineConfig config) {
    auto e = EngineCore::create(*loaded_->model, *loaded_->tokenizer, config);
    EXPECT_TRUE(e.ok()) << e.error();
    return e ? std::move(*e) : nullptr;
  }
  static inline std::string path_;
  static inline Loaded* loaded_ = nullptr;
};

TEST_F(HybridEngineTest, BatchedAndChunkedEqualEachRequestAlone) {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 10; ++i) prompts.push_back(random_prompt(1 + (i * 37) % 90, 100 + i));
  auto alone = engine({.num_kv_blocks = 64, .max_model_len = 256});
  std::vector<Generation> expected;
  for (const auto& p : prompts) expected.push_back(run_alone(*alone, p, greedy(12)));
  // A small token budget: prompts are cut into chunks next to other requests' decodes.
  auto batched = engine({.num_kv_blocks = 256, .max_num_batched_tokens = 24, .max_num_seqs = 10,
                         .max_model_len = 256});
  std::vector<RequestId> ids;
  for (const auto& p : prompts) ids.push_back(*batched->add_request(p, greedy(12)));
  auto got = run(*batched);
  std::set<int32_t> distinct;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[ids[i]].tokens, expected[i].tokens);
    EXPECT_EQ(got[ids[i]].tokens.size(), 12u);
    distinct.insert(expected[i].tokens.begin(), expected[i].tokens.end());
  }
  EXPECT_GT(distinct.size(), 8u);  // the outputs vary, so equality says something
  EXPECT_EQ(batched->stats().num_finished, 10);
  EXPECT_EQ(batched->stats().kv_usage, 0.0);
}

TEST_F(HybridEngineTest, PreemptionRecomputesTheStateAndGivesTheSameOutputs) {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 8; ++i) prompts.push_back(random_prompt(20 + i * 4, 200 + i));
  auto small = engine({.num_kv_blocks = 10, .max_num_seqs = 8, .max_model_len = 128});
  auto big = engine({.num_kv_blocks = 128, .max_num_seqs = 8, .max_model_len = 128});
  std::vector<RequestId> small_ids, big_ids;
  for (const auto& p : prompts) {
    small_ids.push_back(*small->add_request(p, greedy(24)));
    big_ids.push_back(*big->add_request(p, greedy(24)));
  }
  auto got = run(*small);
  auto expected = run(*big);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[small_ids[i]].reason, FinishReason::kLength);
    EXPECT_EQ(got[small_ids[i]].tokens, expected[big_ids[i]].tokens);
  }
  EXPECT_GT(small->stats().num_preemptions, 0);
  EXPECT_EQ(small->stats().kv_usage, 0.0);
}

TEST_F(HybridEngineTest, ForkedSamplesContinueFromTheParentsState) {
  const auto prompt = random_prompt(45, 1650);
  auto e = engine({.num_kv_blocks = 64, .max_num_seqs = 8, .max_model_len = 256});
  const Generation ref = run_alone(*e, prompt, greedy(20));
  SamplingParams p = greedy(20);
  p.n = 3;
  auto id = e->add_request(prompt, p);
  ASSERT_TRUE(id.ok()) << id.error();
  auto g = run_all(*e);
  ASSERT_EQ(g.size(), 3u);
  for (int32_t i = 0; i < 3; ++i) EXPECT_EQ((g[{*id, i}].tokens), ref.tokens) << i;
  // Forks under preemption: 3 samples of ~90 tokens do not fit 11 blocks at once.
  auto f = engine({.num_kv_blocks = 11, .max_num_seqs = 8, .max_model_len = 160});
  SamplingParams long_p = greedy(40);
  const Generation long_ref = run_alone(*e, prompt, long_p);
  long_p.n = 3;
  auto id2 = f->add_request(prompt, long_p);
  ASSERT_TRUE(id2.ok()) << id2.error();
  auto g2 = run_all(*f);
  for (int32_t i = 0; i < 3; ++i) EXPECT_EQ((g2[{*id2, i}].tokens), long_ref.tokens) << i;
  EXPECT_GT(f->stats().num_preemptions, 0);
  EXPECT_EQ(f->stats().kv_usage, 0.0);
}

TEST_F(HybridEngineTest, PrefixCachingIsOffAndSpeculationRefused) {
  const std::vector<int32_t> prefix = random_prompt(64, 300);
  auto e = engine({.num_kv_blocks = 64, .enable_prefix_caching = true, .max_num_seqs = 4,
                   .max_model_len = 256});
  const Generation first = run_alone(*e, prefix, greedy(4));
  const Generation second = run_alone(*e, prefix, greedy(4));
  EXPECT_EQ(first.tokens, second.tokens);
  EXPECT_EQ(second.metrics.num_cached_prompt_tokens, 0);
  EXPECT_EQ(e->stats().prefix_cache_hits, 0);

  // KV tiers hold prefix-cache blocks only: off too (logged), and the engine still runs.
  EngineConfig tiered{.num_kv_blocks = 64, .max_num_seqs = 4, .max_model_len = 256};
  tiered.kv_tiers.memory_bytes = 1 << 20;
  auto t = engine(tiered);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kv_tiers(), nullptr);
  EXPECT_EQ(run_alone(*t, prefix, greedy(4)).tokens, first.tokens);

  EngineConfig spec{.num_kv_blocks = 64, .max_model_len = 256};
  spec.speculative.method = SpeculativeMethod::kNgram;
  spec.speculative.num_speculative_tokens = 2;
  auto refused = EngineCore::create(*loaded_->model, *loaded_->tokenizer, spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("speculative"), std::string::npos) << refused.error();
}

}  // namespace
}  // namespace cadenza::engine
