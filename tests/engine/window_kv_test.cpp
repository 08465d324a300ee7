// The engine on a sliding-window model (gemma3: 5 windowed layers of 6) with the window group
// (EngineConfig::sliding_window_kv: the windowed layers keep only their window's KV blocks)
// against the same engine with full-context KV in every layer: identical tokens alone, batched
// with chunked prompts, with prefix-cache hits, preemption, n > 1 forks and speculative
// rollbacks; and the window group really holds fewer bytes. A tiny gemma3-small shape written by
// the synthesizer (window 16 positions, so every prompt here crosses it).
#include <set>

#include "engine_test_util.h"

namespace cadenza::engine {
namespace {

using namespace test_util;

synth::SynthOptions gemma3_small() {
  synth::SynthOptions opts;
  opts.shape = *synth::find_preset("gemma3-small");
  opts.shape.n_vocab = 300;
  opts.weight_type = "f32";
  opts.seed = 7;
  return opts;
}

class WindowKvTest : public SynthModelTest<gemma3_small> {
 protected:
  void SetUp() override {
    SynthModelTest::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(loaded_->model->config().attention_window(0), 16);
    ASSERT_EQ(loaded_->model->config().attention_window(5), 0);
  }
  static EngineConfig full(EngineConfig c) {
    c.sliding_window_kv = false;
    return c;
  }
};

TEST_F(WindowKvTest, WindowGroupIsOnByDefaultAndOffOnRequest) {
  auto w = engine({.num_kv_blocks = 64, .max_num_seqs = 4, .max_model_len = 256});
  ASSERT_TRUE(w->kv_manager().has_window_group());
  EXPECT_EQ(w->kv_manager().window(), 16);
  // kv::kv_window_blocks: 4 sequences x (ceil(15 / 16) + 2) + 2048 / 16, capped at the main pool.
  EXPECT_EQ(w->kv_manager().num_window_blocks(), 64);
  auto w2 = engine({.num_kv_blocks = 64, .max_num_batched_tokens = 64, .max_num_seqs = 4,
                    .max_model_len = 256});
  EXPECT_EQ(w2->kv_manager().num_window_blocks(), 4 * 3 + 4);
  auto f = engine(full({.num_kv_blocks = 64, .max_model_len = 256}));
  EXPECT_FALSE(f->kv_manager().has_window_group());
  // Too few window blocks for one sequence's window and step: a start-up error, not a hang.
  auto bad = EngineCore::create(*loaded_->model, *loaded_->tokenizer,
                                {.num_kv_blocks = 64, .max_num_batched_tokens = 64,
                                 .max_num_seqs = 4, .max_model_len = 256, .num_window_kv_blocks = 2});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("window KV blocks"), std::string::npos) << bad.error();
}

TEST_F(WindowKvTest, BatchedChunkedAndCachedEqualFullAttentionKv) {
  std::vector<std::vector<int32_t>> prompts;
  const std::vector<int32_t> shared = random_prompt(70, 900);  // a prefix several share
  for (uint32_t i = 0; i < 10; ++i) {
    std::vector<int32_t> p = random_prompt(1 + (i * 37) % 120, 100 + i);
    if (i % 3 == 0) p.insert(p.begin(), shared.begin(), shared.end());
    prompts.push_back(std::move(p));
  }
  auto reference = engine(full({.num_kv_blocks = 128, .enable_prefix_caching = false, .max_model_len = 256}));
  std::vector<Generation> expected;
  for (const auto& p : prompts) expected.push_back(run_alone(*reference, p, greedy(20)));

  // Small budget (chunks next to decodes), shared prefixes hitting the cache, a window group.
  auto windowed = engine({.num_kv_blocks = 256, .max_num_batched_tokens = 24, .max_num_seqs = 10,
                          .max_model_len = 256});
  ASSERT_TRUE(windowed->kv_manager().has_window_group());
  std::vector<RequestId> ids;
  for (const auto& p : prompts) ids.push_back(*windowed->add_request(p, greedy(20)));
  auto got = run(*windowed);
  std::set<int32_t> distinct;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[ids[i]].tokens, expected[i].tokens);
    distinct.insert(expected[i].tokens.begin(), expected[i].tokens.end());
  }
  EXPECT_GT(distinct.size(), 8u);  // the outputs vary, so equality says something
  EXPECT_EQ(windowed->stats().kv_usage, 0.0);

  // Run again on the warm cache: every shared prompt hits, and the outputs stay the same.
  ids.clear();
  for (const auto& p : prompts) ids.push_back(*windowed->add_request(p, greedy(20)));
  got = run(*windowed);
  int hits = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[ids[i]].tokens, expected[i].tokens);
    hits += got[ids[i]].metrics.num_cached_prompt_tokens > 0;
  }
  EXPECT_GE(hits, 4);
  EXPECT_EQ(windowed->stats().kv_usage, 0.0);
}

TEST_F(WindowKvTest, AHitNeedsTheWindowBlocksBeforeIt) {
  // A request caches a 96-token prefix, then many others evict the window pool's blocks but not
  // the main pool's: the next request with that prefix may reuse only what its window allows.
  auto e = engine({.num_kv_blocks = 256, .max_num_batched_tokens = 64, .max_num_seqs = 2,
                   .max_model_len = 256});
  auto reference = engine(full({.num_kv_blocks = 64, .enable_prefix_caching = false, .max_model_len = 256}));
  const std::vector<int32_t> p = random_prompt(100, 31);
  const Generation want = run_alone(*reference, p, greedy(8));
  EXPECT_EQ(run_alone(*e, p, greedy(8)).tokens, want.tokens);
  const Generation again = run_alone(*e, p, greedy(8));
  EXPECT_EQ(again.tokens, want.tokens);
  EXPECT_EQ(again.metrics.num_cached_prompt_tokens, 96);
  // Fill the window pool with other content (long distinct prompts), then ask again.
  for (uint32_t i = 0; i < 6; ++i) run_alone(*e, random_prompt(200, 500 + i), greedy(2));
  const Generation late = run_alone(*e, p, greedy(8));
  EXPECT_EQ(late.tokens, want.tokens);
  // The main pool still holds the prefix's blocks, but the window blocks before its end are
  // gone: no prefix of it is usable (each needs the window blocks right before its end).
  EXPECT_EQ(late.metrics.num_cached_prompt_tokens, 0);
  EXPECT_EQ(e->stats().kv_usage, 0.0);
}

TEST_F(WindowKvTest, PreemptionForksAndRollbacksGiveTheFullKvOutputs) {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 8; ++i) prompts.push_back(random_prompt(20 + i * 9, 200 + i));
  auto reference = engine(full({.num_kv_blocks = 128, .max_num_seqs = 8, .max_model_len = 160}));
  std::vector<RequestId> ref_ids;
  for (const auto& p : prompts) ref_ids.push_back(*reference->add_request(p, greedy(40)));
  auto want = run(*reference);

  // A tight main pool: requests are preempted and recomputed (their window blocks released).
  auto small = engine({.num_kv_blocks = 12, .max_num_seqs = 8, .max_model_len = 160});
  ASSERT_TRUE(small->kv_manager().has_window_group());
  std::vector<RequestId> ids;
  for (const auto& p : prompts) ids.push_back(*small->add_request(p, greedy(40)));
  auto got = run(*small);
  EXPECT_GT(small->stats().num_preemptions, 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[ids[i]].tokens, want[ref_ids[i]].tokens);
  }
  EXPECT_EQ(small->stats().kv_usage, 0.0);

  // n > 1 with sampling: forked samples copy the partial block in both groups.
  SamplingParams sp;
  sp.n = 4;
  sp.temperature = 0.9f;
  sp.seed = 11;
  sp.max_tokens = 30;
  sp.ignore_eos = true;
  const std::vector<int32_t> p = random_prompt(45, 77);  // 45: a partial last block
  auto f_ref = engine(full({.num_kv_blocks = 128, .max_model_len = 160}));
  auto f_win = engine({.num_kv_blocks = 128, .max_model_len = 160});
  const RequestId a = *f_ref->add_request(p, sp);
  const RequestId b = *f_win->add_request(p, sp);
  auto ga = run_all(*f_ref);
  auto gb = run_all(*f_win);
  std::set<std::vector<int32_t>> distinct;
  for (int32_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    const Key ka{a, i}, kb{b, i};
    EXPECT_EQ(gb[kb].tokens, ga[ka].tokens);
    EXPECT_EQ(gb[kb].tokens.size(), 30u);
    distinct.insert(ga[ka].tokens);
  }
  EXPECT_GT(distinct.size(), 1u);
  EXPECT_EQ(f_win->stats().kv_usage, 0.0);

  // Speculative decoding (n-gram drafts on a repetitive prompt): rejected drafts are trimmed in
  // both groups.
  std::vector<int32_t> rep;
  for (int i = 0; i < 6; ++i)
    for (int32_t t : random_prompt(11, 3)) rep.push_back(t);
  EngineConfig spec{.num_kv_blocks = 128, .max_model_len = 160};
  spec.speculative.method = SpeculativeMethod::kNgram;
  spec.speculative.num_speculative_tokens = 4;
  auto s_ref = engine(full(spec));
  auto s_win = engine(spec);
  ASSERT_TRUE(s_win->kv_manager().has_window_group());
  const Generation sa = run_alone(*s_ref, rep, greedy(60));
  const Generation sb = run_alone(*s_win, rep, greedy(60));
  EXPECT_EQ(sb.tokens, sa.tokens);
  EXPECT_GT(s_win->stats().num_spec_draft_tokens, 0);
  EXPECT_EQ(s_win->stats().kv_usage, 0.0);
}

TEST_F(WindowKvTest, ALongRequestHoldsOnlyItsWindowInTheWindowedLayers) {
  // One 240-token request: with the window group, 5 of 6 layers hold about one window (16) plus
  // a step's worth of positions; without, all 240 in every layer.
  const std::vector<int32_t> p = random_prompt(240, 8);
  int64_t peak[2] = {0, 0};
  for (int w = 0; w < 2; ++w) {
    EngineConfig c{.num_kv_blocks = 64, .max_num_batched_tokens = 32, .max_num_seqs = 4, .max_model_len = 256};
    c.sliding_window_kv = w == 1;
    auto e = engine(c);
    ASSERT_TRUE(e->add_request(p, greedy(4)).ok());
    while (e->has_work()) {
      e->step();
      peak[w] = std::max(peak[w], e->stats().kv_used_bytes);
    }
  }
  // Per block and layer: 16 slots x 2 KV heads x 64 x 2 (K and V) x 2 bytes (f16) = 8 KiB.
  const int64_t per_layer_block = 16 * 2 * 64 * 2 * 2;
  EXPECT_EQ(peak[0], 16 * 6 * per_layer_block);  // 244 positions: 16 blocks in all 6 layers
  // Window group: 16 blocks in the global layer; the windowed ones at most the window behind a
  // 32-token step (ceil(15 / 16) + 2 + 1 blocks).
  EXPECT_LE(peak[1], 16 * per_layer_block + 4 * 5 * per_layer_block);
  EXPECT_GE(peak[1], 16 * per_layer_block + 2 * 5 * per_layer_block);
}

}  // namespace
}  // namespace cadenza::engine
