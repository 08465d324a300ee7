// The engine on the hybrid families (recurrent layers with a state per sequence beside the
// attention layers' paged KV), each test typed over qwen35 (Gated DeltaNet linear attention) and
// granitehybrid (Mamba-2, attention without RoPE, Granite's multipliers; dense and with routed
// experts): concurrent requests with chunked prompts equal each alone, preemption (recompute) and
// n > 1 forks (the state copied) give the single run's outputs, prefix caching resumes from
// recurrent-state snapshots (with the same outputs as without), and speculation is refused. Tiny
// shapes of their small presets written by the synthesizer (no ../shared needed).
#include <set>
#include <string>

#include "engine_test_util.h"

namespace cadenza::engine {
namespace {

using namespace test_util;

// The hybrid families, each a tiny shape of its small preset: three layers, two recurrent
// (linear-attention or Mamba-2) then one attention layer.
synth::SynthOptions hybrid_options(const char* preset, uint64_t seed) {
  synth::SynthOptions opts;
  opts.shape = *synth::find_preset(preset);
  opts.shape.n_vocab = 300;
  opts.shape.n_layer = 3;
  opts.weight_type = "f32";
  opts.seed = seed;
  return opts;
}
struct Qwen35 {
  static constexpr const char* name = "qwen35";
  static synth::SynthOptions options() { return hybrid_options("qwen35-small", 5); }
};
struct GraniteHybrid {
  static constexpr const char* name = "granitehybrid";
  static synth::SynthOptions options() { return hybrid_options("granitehybrid-small", 5); }
};
struct GraniteHybridMoe {  // routed experts and a shared expert in every layer
  static constexpr const char* name = "granitehybrid_moe";
  static synth::SynthOptions options() { return hybrid_options("granitehybrid-moe-small", 5); }
};

template <class Family>
class HybridEngineTest : public SynthModelTest<&Family::options> {
 protected:
  void SetUp() override {
    SynthModelTest<&Family::options>::SetUp();
    ASSERT_FALSE(this->HasFatalFailure());
    ASSERT_TRUE(this->loaded_->model->config().hybrid());
  }
};

struct FamilyName {
  template <class Family>
  static std::string GetName(int) {
    return Family::name;
  }
};
using HybridFamilies = testing::Types<Qwen35, GraniteHybrid, GraniteHybridMoe>;
TYPED_TEST_SUITE(HybridEngineTest, HybridFamilies, FamilyName);

TYPED_TEST(HybridEngineTest, BatchedAndChunkedEqualEachRequestAlone) {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 10; ++i) prompts.push_back(random_prompt(1 + (i * 37) % 90, 100 + i));
  auto alone = this->engine({.num_kv_blocks = 64, .max_model_len = 256});
  std::vector<Generation> expected;
  for (const auto& p : prompts) expected.push_back(run_alone(*alone, p, greedy(12)));
  // A small token budget: prompts are cut into chunks next to other requests' decodes.
  auto batched = this->engine({.num_kv_blocks = 256, .max_num_batched_tokens = 24, .max_num_seqs = 10,
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

TYPED_TEST(HybridEngineTest, PreemptionRecomputesTheStateAndGivesTheSameOutputs) {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 8; ++i) prompts.push_back(random_prompt(20 + i * 4, 200 + i));
  auto small = this->engine({.num_kv_blocks = 10, .max_num_seqs = 8, .max_model_len = 128});
  auto big = this->engine({.num_kv_blocks = 128, .max_num_seqs = 8, .max_model_len = 128});
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

TYPED_TEST(HybridEngineTest, ForkedSamplesContinueFromTheParentsState) {
  const auto prompt = random_prompt(45, 1650);
  auto e = this->engine({.num_kv_blocks = 64, .max_num_seqs = 8, .max_model_len = 256});
  const Generation ref = run_alone(*e, prompt, greedy(20));
  SamplingParams p = greedy(20);
  p.n = 3;
  auto id = e->add_request(prompt, p);
  ASSERT_TRUE(id.ok()) << id.error();
  auto g = run_all(*e);
  ASSERT_EQ(g.size(), 3u);
  for (int32_t i = 0; i < 3; ++i) EXPECT_EQ((g[{*id, i}].tokens), ref.tokens) << i;
  // Forks under preemption: 3 samples of ~90 tokens do not fit 11 blocks at once.
  auto f = this->engine({.num_kv_blocks = 11, .max_num_seqs = 8, .max_model_len = 160});
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

TYPED_TEST(HybridEngineTest, PrefixCachingResumesFromStateSnapshots) {
  // A 1,000-token prefix, then two different continuations.
  const std::vector<int32_t> prefix = random_prompt(1000, 300);
  auto with = [&](uint32_t seed) {
    std::vector<int32_t> p = prefix;
    for (int32_t t : random_prompt(20, seed)) p.push_back(t);
    return p;
  };
  const std::vector<int32_t> a = with(301), b = with(302);
  auto reference = this->engine({.num_kv_blocks = 80, .enable_prefix_caching = false, .max_num_seqs = 4,
                           .max_model_len = 1100});
  const Generation ref_prefix = run_alone(*reference, prefix, greedy(8));
  const Generation ref_a = run_alone(*reference, a, greedy(8));
  const Generation ref_b = run_alone(*reference, b, greedy(8));
  EXPECT_EQ(reference->stats().state_snapshots, 0);

  // Multi-turn: the whole earlier prompt is a prefix of the next one. Its state was snapshotted
  // after its last full block (992 tokens), where the chunk was cut.
  auto e = this->engine({.num_kv_blocks = 160, .max_num_seqs = 4, .max_model_len = 1100});
  EXPECT_TRUE(e->kv_manager().prefix_caching());
  const Generation first = run_alone(*e, prefix, greedy(8));
  EXPECT_EQ(first.tokens, ref_prefix.tokens);
  EXPECT_EQ(first.metrics.num_cached_prompt_tokens, 0);
  EXPECT_GE(e->stats().state_snapshots, 2);  // at 512 (the interval) and 992 (the last block)
  const Generation second = run_alone(*e, a, greedy(8));
  EXPECT_EQ(second.tokens, ref_a.tokens);
  EXPECT_EQ(second.metrics.num_cached_prompt_tokens, 992);
  const Generation third = run_alone(*e, b, greedy(8));
  EXPECT_EQ(third.tokens, ref_b.tokens);
  EXPECT_EQ(third.metrics.num_cached_prompt_tokens, 992);
  EXPECT_EQ(e->stats().state_snapshot_restores, 2);
  // The same prompt again: everything but the last block is reused (1008 of 1020 tokens).
  EXPECT_EQ(run_alone(*e, a, greedy(8)).metrics.num_cached_prompt_tokens, 1008);

  // A shared system prompt: the first request's snapshots are at 512 (the interval) and 1008 (its
  // last block); the second diverges at 1000, so it resumes from 512 (attention blocks 0..31
  // from the cache, the state from the snapshot) and computes the rest.
  auto f = this->engine({.num_kv_blocks = 160, .max_num_seqs = 4, .max_model_len = 1100});
  EXPECT_EQ(run_alone(*f, a, greedy(8)).tokens, ref_a.tokens);
  const Generation other = run_alone(*f, b, greedy(8));
  EXPECT_EQ(other.tokens, ref_b.tokens);
  EXPECT_EQ(other.metrics.num_cached_prompt_tokens, 512);

  // Snapshots live within their budget (LRU): room for one only, the older prefixes lose theirs.
  const size_t one = e->stats().state_snapshot_bytes / static_cast<size_t>(e->stats().state_snapshots);
  EngineConfig tight{.num_kv_blocks = 160, .max_num_seqs = 4, .max_model_len = 1100};
  tight.state_snapshot_bytes = static_cast<int64_t>(one);
  auto t = this->engine(tight);
  EXPECT_EQ(run_alone(*t, a, greedy(8)).tokens, ref_a.tokens);
  EXPECT_EQ(t->stats().state_snapshots, 1);  // 1008 (the last one taken) evicted 512
  const Generation t2 = run_alone(*t, b, greedy(8));
  EXPECT_EQ(t2.tokens, ref_b.tokens);
  EXPECT_EQ(t2.metrics.num_cached_prompt_tokens, 0);  // 512's snapshot is gone

  // No snapshot memory: prefix caching is off for the hybrid model.
  EngineConfig none{.num_kv_blocks = 80, .max_num_seqs = 4, .max_model_len = 1100};
  none.state_snapshot_bytes = 0;
  auto n = this->engine(none);
  EXPECT_FALSE(n->kv_manager().prefix_caching());
  run_alone(*n, prefix, greedy(2));
  EXPECT_EQ(run_alone(*n, a, greedy(8)).metrics.num_cached_prompt_tokens, 0);
}

TYPED_TEST(HybridEngineTest, CachedPrefixesUnderPreemptionAndForksGiveTheUncachedOutputs) {
  // Requests sharing a 200-token prefix, sampled with n = 3, in a pool small enough to preempt:
  // re-admitted requests resume from snapshots of their own prefixes, queued samples from the
  // prompt's, forked ones copy the parent's state.
  const std::vector<int32_t> prefix = random_prompt(200, 400);
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 5; ++i) {
    std::vector<int32_t> p = prefix;
    for (int32_t t : random_prompt(5 + i * 7, 410 + i)) p.push_back(t);
    prompts.push_back(std::move(p));
  }
  SamplingParams sp;
  sp.n = 3;
  sp.temperature = 0.8f;
  sp.seed = 42;
  sp.max_tokens = 40;
  sp.ignore_eos = true;
  auto run_with = [&](EngineConfig c, int64_t* preemptions, int64_t* restores) {
    auto e = this->engine(c);
    std::vector<RequestId> ids;
    for (const auto& p : prompts) ids.push_back(*e->add_request(p, sp));
    auto g = run_all(*e);
    std::vector<std::vector<int32_t>> out;
    for (RequestId id : ids)
      for (int32_t i = 0; i < 3; ++i) out.push_back(g[Key{id, i}].tokens);
    *preemptions = e->stats().num_preemptions;
    *restores = e->stats().state_snapshot_restores;
    EXPECT_EQ(e->stats().kv_usage, 0.0);
    return out;
  };
  int64_t p0 = 0, r0 = 0, p1 = 0, r1 = 0;
  const auto want = run_with({.num_kv_blocks = 256, .enable_prefix_caching = false,
                              .max_num_batched_tokens = 64, .max_num_seqs = 8, .max_model_len = 320},
                             &p0, &r0);
  const auto got = run_with({.num_kv_blocks = 40, .max_num_batched_tokens = 64, .max_num_seqs = 8,
                             .max_model_len = 320},
                            &p1, &r1);
  EXPECT_EQ(got, want);
  EXPECT_GT(p1, 0);  // preempted, recomputed from snapshots
  EXPECT_GT(r1, 0);
  std::set<std::vector<int32_t>> distinct(want.begin(), want.end());
  EXPECT_GT(distinct.size(), 5u);
}

TYPED_TEST(HybridEngineTest, TiersAreOffAndSpeculationRefused) {
  const std::vector<int32_t> prefix = random_prompt(64, 300);
  auto e = this->engine({.num_kv_blocks = 64, .max_num_seqs = 4, .max_model_len = 256});
  const Generation first = run_alone(*e, prefix, greedy(4));

  // KV tiers hold attention blocks only, not the state snapshots: off (logged), and it runs.
  EngineConfig tiered{.num_kv_blocks = 64, .max_num_seqs = 4, .max_model_len = 256};
  tiered.kv_tiers.memory_bytes = 1 << 20;
  auto t = this->engine(tiered);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kv_tiers(), nullptr);
  EXPECT_EQ(run_alone(*t, prefix, greedy(4)).tokens, first.tokens);

  EngineConfig spec{.num_kv_blocks = 64, .max_model_len = 256};
  spec.speculative.method = SpeculativeMethod::kNgram;
  spec.speculative.num_speculative_tokens = 2;
  auto refused = EngineCore::create(*this->loaded_->model, *this->loaded_->tokenizer, spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("speculative"), std::string::npos) << refused.error();
  EngineConfig odd{.num_kv_blocks = 64, .max_model_len = 256};
  odd.state_snapshot_interval = 100;  // not a multiple of the block size
  EXPECT_FALSE(EngineCore::create(*this->loaded_->model, *this->loaded_->tokenizer, odd).ok());
}

}  // namespace
}  // namespace cadenza::engine
