// EngineCore end to end on a tiny random-weight model written by the synthesizer (no ../shared
// needed), and on a shared golden model when present: batch invariance, preemption under a small
// KV pool, prefix caching, stop strings split across tokens, seeded sampling alone vs batched,
// aborts, and request validation.
#include "engine/engine_core.h"

#include <filesystem>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "request/validate_request.h"
#include "kernels/cpu/cpu_backend.h"
#include "shared_data.h"
#include "synth/synth.h"
#include "engine_test_util.h"

namespace cadenza::engine {
namespace {

using namespace test_util;

TEST_F(EngineTest, BatchedGreedyOutputsEqualEachRequestAlone) {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 16; ++i) prompts.push_back(random_prompt(1 + (i * 37) % 90, 100 + i));
  auto alone = engine({.num_kv_blocks = 64, .max_model_len = 256});
  std::vector<Generation> expected;
  for (const auto& p : prompts) expected.push_back(run_alone(*alone, p, greedy(10)));

  // Together, with a small token budget so that prompts are chunked next to decodes.
  auto batched = engine({.num_kv_blocks = 256, .max_num_batched_tokens = 48, .max_num_seqs = 16,
                         .max_model_len = 256});
  std::vector<RequestId> ids;
  for (const auto& p : prompts) ids.push_back(*batched->add_request(p, greedy(10)));
  auto got = run(*batched);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[ids[i]].tokens, expected[i].tokens);
    EXPECT_EQ(got[ids[i]].text, expected[i].text);
    EXPECT_EQ(got[ids[i]].reason, FinishReason::kLength);
    EXPECT_EQ(got[ids[i]].tokens.size(), 10u);
  }
  // The random model's outputs vary (else the comparison would prove little).
  std::set<int32_t> distinct;
  for (const auto& g : expected) distinct.insert(g.tokens.begin(), g.tokens.end());
  EXPECT_GT(distinct.size(), 8u);
  EXPECT_EQ(batched->stats().num_preemptions, 0);
  EXPECT_EQ(batched->stats().num_finished, 16);
  EXPECT_EQ(batched->stats().kv_usage, 0.0);
}

TEST_F(EngineTest, SmallKvPoolCompletesEveryRequestThroughPreemption) {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 8; ++i) prompts.push_back(random_prompt(20 + i * 4, 200 + i));
  // 10 blocks of 16 tokens; each request grows to 3-4 blocks, 8 of them at once need ~28.
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
    EXPECT_EQ(got[small_ids[i]].text, expected[big_ids[i]].text);
  }
  EXPECT_GT(small->stats().num_preemptions, 0);
  EXPECT_EQ(big->stats().num_preemptions, 0);
  EXPECT_EQ(small->stats().kv_usage, 0.0);
}

TEST_F(EngineTest, SharedPrefixIsComputedOnce) {
  const std::vector<int32_t> prefix = random_prompt(1000, 300);
  std::vector<int32_t> a = prefix, b = prefix;
  for (int32_t t : random_prompt(7, 301)) a.push_back(t);
  for (int32_t t : random_prompt(12, 302)) b.push_back(t);

  auto cached = engine({.num_kv_blocks = 160, .max_model_len = 1100});
  Generation first = run_alone(*cached, a, greedy(6));
  const EngineStats before = cached->stats();
  Generation second = run_alone(*cached, b, greedy(6));
  const EngineStats after = cached->stats();
  // 62 full blocks of the 1,000-token prefix are shared; only the rest of b is computed.
  EXPECT_EQ(second.metrics.num_cached_prompt_tokens, 992);
  EXPECT_EQ(after.prefix_cache_hits - before.prefix_cache_hits, 1);
  EXPECT_EQ(after.prefix_cache_hit_tokens - before.prefix_cache_hit_tokens, 992);
  // Prompt: 1,012 - 992 = 20 tokens, then 5 decode steps of one token.
  EXPECT_EQ(after.num_computed_tokens - before.num_computed_tokens, 20 + 5);

  auto uncached = engine({.num_kv_blocks = 160, .enable_prefix_caching = false, .max_model_len = 1100});
  Generation reference = run_alone(*uncached, b, greedy(6));
  EXPECT_EQ(second.tokens, reference.tokens);
  EXPECT_EQ(second.text, reference.text);
  EXPECT_EQ(reference.metrics.num_cached_prompt_tokens, 0);
  EXPECT_EQ(uncached->stats().prefix_cache_hits, 0);
  EXPECT_EQ(first.tokens, run_alone(*uncached, a, greedy(6)).tokens);
}

TEST_F(EngineTest, StopStringSplitAcrossTokensNeverLeaks) {
  auto e = engine({.num_kv_blocks = 64, .max_model_len = 256});
  // A printable-ASCII prompt; the reference run has no stop strings.
  std::vector<int32_t> prompt;
  for (int32_t t : random_prompt(24, 400)) prompt.push_back(32 + t % 95);
  Generation ref = run_alone(*e, prompt, greedy(64));
  // Two consecutive non-empty deltas (two different tokens' text) form the stop string.
  std::string stop;
  for (size_t k = 0; k + 1 < ref.deltas.size() && stop.empty(); ++k)
    if (!ref.deltas[k].empty() && !ref.deltas[k + 1].empty()) stop = ref.deltas[k] + ref.deltas[k + 1];
  ASSERT_FALSE(stop.empty()) << "the reference text has no two consecutive non-empty deltas";
  const std::string expected = ref.text.substr(0, ref.text.find(stop));

  SamplingParams p = greedy(64);
  p.stop = {stop};
  Generation got = run_alone(*e, prompt, p);
  EXPECT_EQ(got.reason, FinishReason::kStop);
  EXPECT_EQ(got.text, expected);
  EXPECT_EQ(got.text.find(stop), std::string::npos);
  ASSERT_LE(got.tokens.size(), ref.tokens.size());
  EXPECT_TRUE(std::equal(got.tokens.begin(), got.tokens.end(), ref.tokens.begin()));
  // Stop token ids end generation too (the token is kept, its text is not returned).
  SamplingParams q = greedy(64);
  q.stop_token_ids = {ref.tokens[3]};
  Generation by_id = run_alone(*e, prompt, q);
  EXPECT_EQ(by_id.reason, FinishReason::kStop);
  EXPECT_LE(by_id.tokens.size(), 4u);
  EXPECT_EQ(by_id.tokens.back(), ref.tokens[3]);
}

TEST_F(EngineTest, SeededSamplingIsTheSameAloneAndBatched) {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 6; ++i) prompts.push_back(random_prompt(5 + i * 11, 500 + i));
  auto params = [](uint64_t seed) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0;
    p.seed = seed;
    p.max_tokens = 16;
    p.ignore_eos = true;
    return p;
  };
  auto alone = engine({.num_kv_blocks = 64, .max_model_len = 256});
  std::vector<Generation> expected;
  for (size_t i = 0; i < prompts.size(); ++i)
    expected.push_back(run_alone(*alone, prompts[i], params(1000 + i)));
  auto batched = engine({.num_kv_blocks = 64, .max_num_batched_tokens = 32, .max_num_seqs = 16, .max_model_len = 256});
  std::vector<RequestId> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back(*batched->add_request(prompts[i], params(1000 + i)));
    ASSERT_TRUE(batched->add_request(random_prompt(9, 600 + i), params(7)).ok());  // neighbours
  }
  auto got = run(*batched);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[ids[i]].tokens, expected[i].tokens);
  }
  // A different seed gives a different stream.
  EXPECT_NE(run_alone(*alone, prompts[0], params(999)).tokens, expected[0].tokens);
}

TEST_F(EngineTest, AbortFreesAllBlocks) {
  auto e = engine({.num_kv_blocks = 64, .max_num_batched_tokens = 32, .max_num_seqs = 16, .max_model_len = 256});
  std::vector<RequestId> ids;
  for (uint32_t i = 0; i < 5; ++i) ids.push_back(*e->add_request(random_prompt(30, 700 + i), greedy(100)));
  for (int i = 0; i < 4; ++i) e->step();
  EXPECT_GT(e->stats().kv_usage, 0.0);
  for (RequestId id : ids) EXPECT_TRUE(e->abort(id));
  EXPECT_FALSE(e->abort(12345));
  auto outs = e->step();
  ASSERT_EQ(outs.size(), ids.size());
  for (const RequestOutput& o : outs) {
    EXPECT_TRUE(o.finished);
    EXPECT_EQ(o.finish_reason, FinishReason::kAbort);
  }
  EXPECT_FALSE(e->has_work());
  EXPECT_EQ(e->stats().kv_usage, 0.0);
  EXPECT_EQ(e->kv_manager().num_free_blocks(), 64);
  EXPECT_FALSE(e->abort(ids[0]));
}

// The engine's rules are validate_request's (request/validate_request.h, tested on its own in
// tests/request): add_request returns its message, for the model's vocabulary and max_model_len.
TEST_F(EngineTest, RejectionsAreValidateRequestsMessages) {
  auto e = engine({.num_kv_blocks = 64, .max_model_len = 256});
  const RequestLimits limits{static_cast<int32_t>(loaded_->model->config().n_vocab), 256};
  struct Case {
    std::vector<int32_t> prompt;
    SamplingParams params;
  };
  std::vector<Case> cases;
  auto add = [&](std::vector<int32_t> prompt, auto change) {
    SamplingParams p = greedy(4);
    change(p);
    cases.push_back({std::move(prompt), p});
  };
  add({}, [](SamplingParams&) {});
  add({1, limits.n_vocab}, [](SamplingParams&) {});
  add(random_prompt(256, 1), [](SamplingParams&) {});
  add(random_prompt(250, 1), [](SamplingParams& p) { p.max_tokens = 7; });
  add({1}, [](SamplingParams& p) { p.top_p = 0; });
  add({1}, [](SamplingParams& p) { p.repetition_penalty = 0; });
  add({1}, [](SamplingParams& p) { p.stop = {""}; });
  add({1}, [&](SamplingParams& p) { p.logit_bias = {{limits.n_vocab, 1.0f}}; });
  add({1}, [](SamplingParams& p) { p.min_tokens = 5; });
  for (const Case& c : cases) {
    const auto expected = validate_request(c.prompt, c.params, limits);
    ASSERT_TRUE(expected);
    auto got = e->add_request(c.prompt, c.params);
    ASSERT_FALSE(got.ok()) << expected->message;
    EXPECT_EQ(got.error(), "request: " + expected->message);
  }
  EXPECT_FALSE(e->has_work());
}

TEST_F(EngineTest, InvalidRequestsAndConfigsAreValues) {
  auto e = engine({.num_kv_blocks = 64, .max_model_len = 256});
  EXPECT_FALSE(e->add_request({}, greedy(4)).ok());
  EXPECT_FALSE(e->add_request({1, 300}, greedy(4)).ok());
  EXPECT_FALSE(e->add_request({1, -1}, greedy(4)).ok());
  EXPECT_FALSE(e->add_request(random_prompt(250, 1), greedy(7)).ok());
  EXPECT_TRUE(e->add_request(random_prompt(250, 1), greedy(6)).ok());
  SamplingParams p = greedy(4);
  p.max_tokens = 0;
  EXPECT_FALSE(e->add_request({1}, p).ok());
  p = greedy(4);
  p.temperature = -1;
  EXPECT_FALSE(e->add_request({1}, p).ok());
  p = greedy(4);
  p.top_p = 0;
  EXPECT_FALSE(e->add_request({1}, p).ok());
  p = greedy(4);
  p.stop = {""};
  EXPECT_FALSE(e->add_request({1}, p).ok());
  p = greedy(4);
  p.stop_token_ids = {1000};
  auto bad = e->add_request({1}, p);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("stop token id"), std::string::npos);

  auto c = EngineCore::create(*loaded_->model, *loaded_->tokenizer,
                              {.num_kv_blocks = 4, .max_model_len = 256});
  EXPECT_FALSE(c.ok());
  c = EngineCore::create(*loaded_->model, *loaded_->tokenizer,
                         {.max_num_batched_tokens = 4, .max_num_seqs = 8});
  EXPECT_FALSE(c.ok());
  c = EngineCore::create(*loaded_->model, *loaded_->tokenizer, {.max_model_len = 1 << 20});
  EXPECT_FALSE(c.ok());
}

TEST_F(EngineTest, ChunkedPromptProducesNoOutputUntilItsLastChunk) {
  auto e = engine({.num_kv_blocks = 64, .max_num_batched_tokens = 16, .max_num_seqs = 4,
                   .max_model_len = 256});
  const std::vector<int32_t> prompt = random_prompt(40, 900);
  ASSERT_TRUE(e->add_request(prompt, greedy(3)).ok());
  EXPECT_TRUE(e->step().empty());  // tokens 0..15
  EXPECT_TRUE(e->step().empty());  // 16..31
  auto outs = e->step();           // 32..39: the first token
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].new_token_ids.size(), 1u);
  auto rest = run(*e);
  auto alone = engine({.num_kv_blocks = 64, .max_model_len = 256});
  Generation ref = run_alone(*alone, prompt, greedy(3));
  EXPECT_EQ(outs[0].new_token_ids[0], ref.tokens[0]);
  EXPECT_EQ(rest.begin()->second.tokens, std::vector<int32_t>(ref.tokens.begin() + 1, ref.tokens.end()));
}

TEST_F(EngineTest, StatsTrackLatencies) {
  auto e = engine({.num_kv_blocks = 64, .max_model_len = 256});
  Generation g = run_alone(*e, random_prompt(10, 800), greedy(5));
  EXPECT_GE(g.metrics.ttft_s, g.metrics.queue_time_s);
  EXPECT_EQ(g.metrics.inter_token_s.size(), 4u);
  EXPECT_EQ(g.metrics.num_output_tokens, 5);
  EXPECT_EQ(g.metrics.num_prompt_tokens, 10);
  const EngineStats s = e->stats();
  EXPECT_EQ(s.ttft.count, 1);
  EXPECT_EQ(s.inter_token.count, 4);
  EXPECT_EQ(s.num_generated_tokens, 5);
  EXPECT_EQ(s.num_running, 0);
  EXPECT_EQ(s.num_waiting, 0);
}

// EngineCore::create reserves the model's scratch for its largest step (Model::reserve): a model
// loaded with the smallest possible reservation still serves full steps of long prompts, and the
// tokens equal those of the fixture's model (default reservation).
TEST_F(EngineTest, CreateReservesTheModelForItsLargestStep) {
  auto backend = kernels::make_cpu_backend({.n_threads = 2});
  auto tiny = model::Model::open(path_, *backend, {.capacity = {1, 1, 1, 1}});
  ASSERT_TRUE(tiny) << tiny.error();
  const EngineConfig config{.block_size = 4, .max_num_batched_tokens = 96, .max_num_seqs = 6,
                            .max_model_len = 128};
  auto e = EngineCore::create(**tiny, *loaded_->tokenizer, config);
  ASSERT_TRUE(e) << e.error();
  EXPECT_EQ((*tiny)->capacity().max_tokens, 96);
  EXPECT_EQ((*tiny)->capacity().max_logit_rows, 6);
  EXPECT_EQ((*tiny)->capacity().max_blocks_per_sequence, 32);
  auto reference = engine(config);
  ASSERT_NE(reference, nullptr);
  std::vector<RequestId> ids, ref_ids;
  for (uint32_t i = 0; i < 6; ++i) {
    const std::vector<int32_t> prompt = random_prompt(70 + 5 * i, 40 + i);
    ids.push_back(*(*e)->add_request(prompt, greedy(12)));
    ref_ids.push_back(*reference->add_request(prompt, greedy(12)));
  }
  auto got = run(**e);
  auto expected = run(*reference);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(got[ids[i]].reason, FinishReason::kLength) << "request " << i;
    EXPECT_EQ(got[ids[i]].tokens.size(), 12u);
    EXPECT_EQ(got[ids[i]].tokens, expected[ref_ids[i]].tokens);
  }
}

// The shared tiny golden models (when ../shared is present): batched greedy equals alone.
TEST(EngineShared, TinyModelsAreBatchInvariant) {
  CADENZA_REQUIRE_SHARED();
  for (const char* name : {"tiny-llama-spm-f16", "tiny-qwen2-f16"}) {
    SCOPED_TRACE(name);
    const auto path = test::shared_dir() / "models" / (std::string(name) + ".gguf");
    // ../shared is present (checked above): a listed model missing from it is a failure.
    ASSERT_TRUE(std::filesystem::exists(path)) << path << " missing from ../shared";
    auto l = load(path.string());
    ASSERT_NE(l, nullptr);
    auto alone = EngineCore::create(*l->model, *l->tokenizer, {.num_kv_blocks = 64, .max_model_len = 256});
    auto batched = EngineCore::create(*l->model, *l->tokenizer,
                                      {.num_kv_blocks = 64, .max_num_batched_tokens = 24, .max_num_seqs = 8, .max_model_len = 256});
    ASSERT_TRUE(alone.ok() && batched.ok());
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 4; ++i) {
      prompts.push_back(l->tokenizer->encode("Once upon a time, number " + std::to_string(i * 7) +
                                                 std::string(i * 5, '!'), true, false));
    }
    std::vector<Generation> expected;
    for (const auto& p : prompts) expected.push_back(run_alone(**alone, p, greedy(8)));
    std::vector<RequestId> ids;
    for (const auto& p : prompts) ids.push_back(*(*batched)->add_request(p, greedy(8)));
    auto got = run(**batched);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[ids[i]].tokens, expected[i].tokens);
  }
}

}  // namespace
}  // namespace cadenza::engine
