// Per-request sampling parameters end to end on the tiny synthesized model: logit bias,
// repetition / presence / frequency penalties against a reference loop over model::Session,
// min_tokens, logprobs against the Session's logits, n > 1 (prompt blocks shared through the
// prefix cache, per-sample seeds), reproducibility alone vs batched, and parameter validation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include <gtest/gtest.h>

#include "engine/engine_core.h"
#include "engine/logits_processor.h"
#include "engine_test_util.h"
#include "model/session.h"

namespace cadenza::engine {
namespace {

using namespace test_util;

class SamplingParamsTest : public EngineTest {
 protected:
  // Logits of every position of `tokens` through a fresh Session: [tokens.size()][n_vocab].
  static std::vector<float> reference_logits(const std::vector<int32_t>& tokens) {
    auto session = model::Session::create(*loaded_->model, {.max_tokens = 512});
    EXPECT_TRUE(session.ok()) << session.error();
    if (!session) return {};
    auto logits = (*session)->eval_all(tokens);
    EXPECT_TRUE(logits.ok()) << logits.error();
    return logits ? std::move(*logits) : std::vector<float>{};
  }
  static int32_t n_vocab() { return static_cast<int32_t>(loaded_->model->config().n_vocab); }
};

std::vector<double> log_softmax(std::span<const float> x) {
  double m = -std::numeric_limits<double>::infinity();
  for (float v : x) m = std::max(m, static_cast<double>(v));
  double sum = 0;
  for (float v : x) sum += std::exp(v - m);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - m - std::log(sum);
  return out;
}

TEST(LogitsProcessor, AppliesBiasThenPenaltiesThenMinTokens) {
  SamplingParams p;
  p.logit_bias = {{0, 1.0f}, {3, 0.5f}};
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.25f;
  p.frequency_penalty = 0.5f;
  p.min_tokens = 2;
  p.stop_token_ids = {4};
  const std::vector<int32_t> prompt = {0, 1};
  const std::vector<int32_t> eog = {5};
  LogitsProcessor lp(p, prompt, eog, 6);
  EXPECT_TRUE(lp.active());
  lp.accept(1);
  lp.accept(1);
  lp.accept(2);
  std::vector<float> x = {1.0f, -1.0f, 3.0f, 0.0f, 2.0f, 2.0f};
  lp.apply(x, 1);
  EXPECT_FLOAT_EQ(x[0], (1.0f + 1.0f) / 2);               // bias, then seen in the prompt
  EXPECT_FLOAT_EQ(x[1], -1.0f * 2 - 0.25f - 0.5f * 2);    // seen; generated twice
  EXPECT_FLOAT_EQ(x[2], 3.0f / 2 - 0.25f - 0.5f);         // generated once
  EXPECT_FLOAT_EQ(x[3], 0.5f);                            // bias only
  EXPECT_EQ(x[4], -std::numeric_limits<float>::infinity());  // stop id before min_tokens
  EXPECT_EQ(x[5], -std::numeric_limits<float>::infinity());  // end of generation
  std::vector<float> y = {0, 0, 0, 0, 2.0f, 2.0f};
  lp.apply(y, 2);  // min_tokens reached
  EXPECT_EQ(y[4], 2.0f);
  EXPECT_EQ(y[5], 2.0f);
  EXPECT_FALSE(LogitsProcessor(SamplingParams{}, prompt, eog, 6).active());
}

TEST(LogitsProcessor, LogprobsAreSortedWithRanks) {
  const std::vector<float> x = {1.0f, 3.0f, 3.0f, -2.0f, 0.5f};
  std::vector<int32_t> scratch;
  const TokenLogprob t = compute_logprobs(x, 4, 3, scratch);
  const std::vector<double> ls = log_softmax(x);
  EXPECT_EQ(t.token, 4);
  EXPECT_NEAR(t.logprob, ls[4], 1e-6);
  EXPECT_EQ(t.rank, 4);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].token, 1);  // ties: lowest id first
  EXPECT_EQ(t.top[1].token, 2);
  EXPECT_EQ(t.top[2].token, 0);
  EXPECT_NEAR(t.top[2].logprob, ls[0], 1e-6);
  EXPECT_EQ(compute_logprobs(x, 1, 20, scratch).top.size(), x.size());
  EXPECT_EQ(compute_logprobs(x, 2, 0, scratch).rank, 1);
}

TEST_F(SamplingParamsTest, LogitBiasForcesAndForbidsTokens) {
  auto e = engine({.num_kv_blocks = 64, .max_model_len = 256});
  const auto prompt = random_prompt(20, 1100);
  const Generation ref = run_alone(*e, prompt, greedy(12));

  SamplingParams force = greedy(12);
  const int32_t forced = (ref.tokens[0] + 17) % 256;
  force.logit_bias = {{forced, 100.0f}};
  const Generation forced_gen = run_alone(*e, prompt, force);
  EXPECT_EQ(forced_gen.tokens, std::vector<int32_t>(12, forced));

  SamplingParams forbid = greedy(12);
  for (int32_t t : std::set<int32_t>(ref.tokens.begin(), ref.tokens.end())) forbid.logit_bias[t] = -100.0f;
  const Generation forbidden = run_alone(*e, prompt, forbid);
  ASSERT_EQ(forbidden.tokens.size(), 12u);
  for (int32_t t : forbidden.tokens) EXPECT_EQ(forbid.logit_bias.count(t), 0u) << t;
}

TEST_F(SamplingParamsTest, HugePresenceOrFrequencyPenaltyForbidsRepeats) {
  auto e = engine({.num_kv_blocks = 64, .max_model_len = 256});
  const auto prompt = random_prompt(16, 1200);
  const Generation ref = run_alone(*e, prompt, greedy(40));
  // The unpenalised greedy output repeats tokens (else the test would prove little).
  EXPECT_LT(std::set<int32_t>(ref.tokens.begin(), ref.tokens.end()).size(), ref.tokens.size());
  for (int which = 0; which < 2; ++which) {
    SCOPED_TRACE(which);
    SamplingParams p = greedy(40);
    (which ? p.presence_penalty : p.frequency_penalty) = 1000.0f;
    const Generation g = run_alone(*e, prompt, p);
    ASSERT_EQ(g.tokens.size(), 40u);
    EXPECT_EQ(std::set<int32_t>(g.tokens.begin(), g.tokens.end()).size(), g.tokens.size());
    // The first token has nothing to penalise yet.
    EXPECT_EQ(g.tokens[0], ref.tokens[0]);
  }
}

// Greedy decoding with every processor on equals a reference loop that applies the documented
// definitions to the Session's logits.
TEST_F(SamplingParamsTest, PenaltiesAndBiasFollowTheDefinitions) {
  const auto prompt = random_prompt(24, 1300);
  SamplingParams p = greedy(24);
  p.repetition_penalty = 1.3f;
  p.presence_penalty = 0.4f;
  p.frequency_penalty = 0.25f;
  p.logit_bias = {{prompt[3], 0.7f}, {5, -0.5f}, {200, 0.3f}};
  auto e = engine({.num_kv_blocks = 64, .max_model_len = 256});
  const Generation got = run_alone(*e, prompt, p);
  ASSERT_EQ(got.tokens.size(), 24u);

  auto session = model::Session::create(*loaded_->model, {.max_tokens = 256});
  ASSERT_TRUE(session.ok());
  std::vector<int32_t> expected;
  std::map<int32_t, int32_t> counts;
  std::set<int32_t> seen(prompt.begin(), prompt.end());
  auto logits = (*session)->eval(prompt);
  for (int i = 0; i < 24; ++i) {
    ASSERT_TRUE(logits.ok()) << logits.error();
    std::vector<float> x = *logits;
    for (const auto& [id, b] : p.logit_bias) x[static_cast<size_t>(id)] += b;
    for (int32_t id : seen) {
      float& v = x[static_cast<size_t>(id)];
      v = v > 0 ? v / p.repetition_penalty : v * p.repetition_penalty;
    }
    for (const auto& [id, c] : counts)
      x[static_cast<size_t>(id)] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(c);
    const int32_t t = argmax(x);
    expected.push_back(t);
    ++counts[t];
    seen.insert(t);
    logits = (*session)->eval({&t, 1});
  }
  EXPECT_EQ(got.tokens, expected);
  // ... and the penalties changed something.
  EXPECT_NE(run_alone(*e, prompt, greedy(24)).tokens, expected);
}

TEST_F(SamplingParamsTest, MinTokensSuppressesStopTokensUntilReached) {
  auto e = engine({.num_kv_blocks = 64, .max_model_len = 256});
  const auto prompt = random_prompt(12, 1400);
  const Generation ref = run_alone(*e, prompt, greedy(20));
  SamplingParams p = greedy(20);
  p.stop_token_ids = {ref.tokens[0]};
  EXPECT_EQ(run_alone(*e, prompt, p).tokens.size(), 1u);
  p.min_tokens = 6;
  const Generation g = run_alone(*e, prompt, p);
  ASSERT_GE(g.tokens.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_NE(g.tokens[i], ref.tokens[0]);
  if (g.reason == FinishReason::kStop) {
    EXPECT_EQ(g.tokens.back(), ref.tokens[0]);
  }
}

TEST_F(SamplingParamsTest, LogprobsMatchTheSessionLogits) {
  const auto prompt = random_prompt(30, 1500);
  for (float temperature : {0.0f, 1.0f}) {
    SCOPED_TRACE(temperature);
    auto e = engine({.num_kv_blocks = 64, .max_model_len = 256});
    SamplingParams p = greedy(10);
    p.temperature = temperature;
    p.top_k = 0;
    p.seed = 5;
    p.logprobs = 5;
    auto id = e->add_request(prompt, p);
    ASSERT_TRUE(id.ok()) << id.error();
    std::map<Key, std::vector<TokenLogprob>> lp;
    auto g = run_all(*e, &lp);
    const std::vector<int32_t>& tokens = g[{*id, 0}].tokens;
    const std::vector<TokenLogprob>& entries = lp[{*id, 0}];
    ASSERT_EQ(tokens.size(), 10u);
    ASSERT_EQ(entries.size(), tokens.size());

    std::vector<int32_t> all = prompt;
    all.insert(all.end(), tokens.begin(), tokens.end() - 1);
    const std::vector<float> ref = reference_logits(all);
    ASSERT_EQ(ref.size(), all.size() * static_cast<size_t>(n_vocab()));
    for (size_t k = 0; k < tokens.size(); ++k) {
      SCOPED_TRACE(k);
      const std::span<const float> row(ref.data() + (prompt.size() - 1 + k) * n_vocab(),
                                       static_cast<size_t>(n_vocab()));
      const std::vector<double> ls = log_softmax(row);
      const TokenLogprob& t = entries[k];
      EXPECT_EQ(t.token, tokens[k]);
      EXPECT_NEAR(t.logprob, ls[static_cast<size_t>(tokens[k])], 1e-5);
      ASSERT_EQ(t.top.size(), 5u);
      for (size_t j = 0; j + 1 < t.top.size(); ++j) EXPECT_GE(t.top[j].logprob, t.top[j + 1].logprob);
      for (const TopLogprob& x : t.top) EXPECT_NEAR(x.logprob, ls[static_cast<size_t>(x.token)], 1e-5);
      EXPECT_EQ(t.top[0].token, argmax(row));  // the greedy token leads the list
      if (temperature == 0.0f) {
        EXPECT_EQ(t.rank, 1);
        EXPECT_EQ(t.top[0].token, t.token);
      }
    }
  }
  // logprobs = 0: the chosen token only.
  auto e = engine({.num_kv_blocks = 64, .max_model_len = 256});
  SamplingParams p = greedy(3);
  p.logprobs = 0;
  std::map<Key, std::vector<TokenLogprob>> lp;
  auto id = e->add_request(prompt, p);
  run_all(*e, &lp);
  ASSERT_EQ((lp[{*id, 0}].size()), 3u);
  EXPECT_TRUE((lp[{*id, 0}][0].top.empty()));
  // Off by default.
  lp.clear();
  id = e->add_request(prompt, greedy(3));
  run_all(*e, &lp);
  EXPECT_TRUE((lp[{*id, 0}].empty()));
}

// n > 1 forks samples 1..n-1 from sample 0 in the step that computes the prompt: the prompt is
// computed once (its partial last block copied), with or without the prefix cache, and every
// sample equals a request run alone.
TEST_F(SamplingParamsTest, ParallelSamplesForkFromTheComputedPrompt) {
  const auto prompt = random_prompt(70, 1600);  // 4 full blocks of 16 + 6 tokens
  auto e = engine({.num_kv_blocks = 64, .max_num_seqs = 8, .max_model_len = 256});
  const Generation ref = run_alone(*e, prompt, greedy(8));
  for (const bool caching : {true, false}) {
    SCOPED_TRACE(caching ? "prefix caching on" : "prefix caching off");
    auto f = engine({.num_kv_blocks = 64, .enable_prefix_caching = caching, .max_num_seqs = 8,
                     .max_model_len = 256});
    SamplingParams p = greedy(8);
    p.n = 4;
    auto id = f->add_request(prompt, p);
    ASSERT_TRUE(id.ok()) << id.error();
    auto g = run_all(*f);
    ASSERT_EQ(g.size(), 4u);
    for (int32_t i = 0; i < 4; ++i) {
      SCOPED_TRACE(i);
      const Generation& s = g[{*id, i}];
      EXPECT_EQ(s.tokens, ref.tokens);
      EXPECT_EQ(s.text, ref.text);
      EXPECT_EQ(s.reason, FinishReason::kLength);
      EXPECT_EQ(s.metrics.num_cached_prompt_tokens, i == 0 ? 0 : 70);
    }
    const EngineStats st = f->stats();
    EXPECT_EQ(st.prefix_cache_hit_tokens, 0);  // forks do not go through the cache
    // The prompt once (70) + 4 x 7 decode steps (each sample's first token comes from the prompt).
    EXPECT_EQ(st.num_computed_tokens, 70 + 4 * 7);
    EXPECT_EQ(st.num_finished, 4);
    EXPECT_EQ(st.kv_usage, 0.0);
  }
}

// When the running set is full, the samples that cannot be forked wait and share the prompt's
// full blocks through the prefix cache instead; outputs are the same.
TEST_F(SamplingParamsTest, ParallelSamplesThatCannotForkQueueAndHitThePrefixCache) {
  const auto prompt = random_prompt(70, 1600);
  auto e = engine({.num_kv_blocks = 64, .max_num_seqs = 8, .max_model_len = 256});
  const Generation ref = run_alone(*e, prompt, greedy(8));
  auto f = engine({.num_kv_blocks = 64, .max_num_seqs = 2, .max_model_len = 256});
  SamplingParams p = greedy(8);
  p.n = 4;
  auto id = f->add_request(prompt, p);
  ASSERT_TRUE(id.ok()) << id.error();
  auto g = run_all(*f);
  ASSERT_EQ(g.size(), 4u);
  for (int32_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ((g[{*id, i}].tokens), ref.tokens);
  }
  EXPECT_EQ((g[{*id, 1}].metrics.num_cached_prompt_tokens), 70);  // forked
  EXPECT_EQ((g[{*id, 2}].metrics.num_cached_prompt_tokens), 64);  // queued: full blocks cached
  EXPECT_EQ((g[{*id, 3}].metrics.num_cached_prompt_tokens), 64);
  const EngineStats st = f->stats();
  EXPECT_EQ(st.prefix_cache_hit_tokens, 2 * 64);
  // The prompt once, the 6 uncached tokens of each queued sample, 4 x 7 decode steps.
  EXPECT_EQ(st.num_computed_tokens, 70 + 2 * 6 + 4 * 7);
  EXPECT_EQ(st.kv_usage, 0.0);
}

// Forked samples under KV pressure: preempted and recomputed, they still equal a run alone, and
// every block comes back.
TEST_F(SamplingParamsTest, ForkedSamplesSurvivePreemption) {
  const auto prompt = random_prompt(70, 1650);
  auto e = engine({.num_kv_blocks = 64, .max_num_seqs = 8, .max_model_len = 256});
  const Generation ref = run_alone(*e, prompt, greedy(40));
  // Each sample needs 7 blocks (110 tokens); 4 are shared: 3 samples need 13 > 11.
  auto f = engine({.num_kv_blocks = 11, .max_num_seqs = 8, .max_model_len = 160});
  SamplingParams p = greedy(40);
  p.n = 3;
  auto id = f->add_request(prompt, p);
  ASSERT_TRUE(id.ok()) << id.error();
  auto g = run_all(*f);
  ASSERT_EQ(g.size(), 3u);
  for (int32_t i = 0; i < 3; ++i) EXPECT_EQ((g[{*id, i}].tokens), ref.tokens) << i;
  const EngineStats st = f->stats();
  EXPECT_GT(st.num_preemptions, 0);
  EXPECT_EQ(st.kv_usage, 0.0);
}

TEST_F(SamplingParamsTest, ParallelSamplesUseSeedPlusIndex) {
  const auto prompt = random_prompt(21, 1700);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0;
  p.seed = 77;
  p.max_tokens = 12;
  p.ignore_eos = true;
  p.n = 3;
  auto e = engine({.num_kv_blocks = 64, .max_num_seqs = 8, .max_model_len = 256});
  auto id = e->add_request(prompt, p);
  ASSERT_TRUE(id.ok());
  auto g = run_all(*e);
  std::set<std::vector<int32_t>> distinct;
  for (int32_t i = 0; i < 3; ++i) {
    SamplingParams one = p;
    one.n = 1;
    one.seed = p.seed + static_cast<uint64_t>(i);
    auto alone = engine({.num_kv_blocks = 64, .max_model_len = 256});
    EXPECT_EQ((g[{*id, i}].tokens), run_alone(*alone, prompt, one).tokens) << i;
    distinct.insert(g[{*id, i}].tokens);
  }
  EXPECT_EQ(distinct.size(), 3u);
}

TEST_F(SamplingParamsTest, AbortEndsEverySample) {
  auto e = engine({.num_kv_blocks = 64, .max_num_batched_tokens = 16, .max_num_seqs = 8,
                   .max_model_len = 256});
  SamplingParams p = greedy(50);
  p.n = 3;
  auto id = e->add_request(random_prompt(40, 1800), p);  // 3 steps of prompt: samples 1, 2 pending
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(e->step().empty());
  EXPECT_TRUE(e->abort(*id));
  auto outs = e->step();
  ASSERT_EQ(outs.size(), 3u);
  std::set<int32_t> indices;
  for (const RequestOutput& o : outs) {
    EXPECT_EQ(o.id, *id);
    EXPECT_TRUE(o.finished);
    EXPECT_EQ(o.finish_reason, FinishReason::kAbort);
    indices.insert(o.index);
  }
  EXPECT_EQ(indices, (std::set<int32_t>{0, 1, 2}));
  EXPECT_FALSE(e->has_work());
  EXPECT_EQ(e->stats().kv_usage, 0.0);
  EXPECT_FALSE(e->abort(*id));

  // Once all samples run, abort reaches each of them.
  id = e->add_request(random_prompt(10, 1801), p);
  for (int i = 0; i < 4; ++i) e->step();
  EXPECT_TRUE(e->abort(*id));
  auto g = run_all(*e);
  ASSERT_EQ(g.size(), 3u);
  for (const auto& [key, gen] : g) EXPECT_EQ(gen.reason, FinishReason::kAbort);
  EXPECT_EQ(e->stats().kv_usage, 0.0);
}

TEST_F(SamplingParamsTest, PenalisedSamplingIsTheSameAloneAndBatched) {
  auto params = [](uint64_t seed) {
    SamplingParams p;
    p.temperature = 0.9f;
    p.top_k = 50;
    p.seed = seed;
    p.max_tokens = 14;
    p.ignore_eos = true;
    p.repetition_penalty = 1.2f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.3f;
    p.logit_bias = {{static_cast<int32_t>(seed % 256), 1.5f}};
    p.logprobs = 2;
    return p;
  };
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 5; ++i) prompts.push_back(random_prompt(7 + i * 13, 1900 + i));
  auto alone = engine({.num_kv_blocks = 64, .max_model_len = 256});
  std::vector<Generation> expected;
  for (size_t i = 0; i < prompts.size(); ++i)
    expected.push_back(run_alone(*alone, prompts[i], params(2000 + i)));
  auto batched = engine({.num_kv_blocks = 64, .max_num_batched_tokens = 32, .max_num_seqs = 16,
                         .max_model_len = 256});
  std::vector<RequestId> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back(*batched->add_request(prompts[i], params(2000 + i)));
    ASSERT_TRUE(batched->add_request(random_prompt(9, 2100 + i), params(3)).ok());  // neighbours
  }
  auto got = run_all(*batched);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ((got[{ids[i], 0}].tokens), expected[i].tokens) << i;
}

TEST_F(SamplingParamsTest, BadParametersAreErrors) {
  auto e = engine({.num_kv_blocks = 64, .max_model_len = 256});
  auto rejected = [&](auto&& edit, const char* what) {
    SamplingParams p = greedy(4);
    edit(p);
    auto r = e->add_request({1, 2, 3}, p);
    EXPECT_FALSE(r.ok()) << what;
    if (!r.ok()) {
      EXPECT_FALSE(r.error().empty());
    }
  };
  rejected([&](SamplingParams& p) { p.logit_bias = {{n_vocab(), 1.0f}}; }, "bias id out of range");
  rejected([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }, "negative bias id");
  rejected([](SamplingParams& p) { p.logit_bias = {{1, std::nanf("")}}; }, "NaN bias");
  rejected([](SamplingParams& p) { p.logprobs = 21; }, "logprobs > 20");
  rejected([](SamplingParams& p) { p.logprobs = -2; }, "logprobs < -1");
  rejected([](SamplingParams& p) { p.n = 0; }, "n < 1");
  rejected([](SamplingParams& p) { p.n = SamplingParams::kMaxN + 1; }, "n too large");
  rejected([](SamplingParams& p) { p.repetition_penalty = 0; }, "repetition_penalty 0");
  rejected([](SamplingParams& p) { p.frequency_penalty = INFINITY; }, "infinite penalty");
  rejected([](SamplingParams& p) { p.min_tokens = 5; }, "min_tokens > max_tokens");
  EXPECT_FALSE(e->has_work());

  SamplingParams ok = greedy(4);
  ok.logit_bias = {{n_vocab() - 1, -3.0f}};
  ok.logprobs = 20;
  ok.n = 2;
  ok.min_tokens = 4;
  ok.repetition_penalty = 0.8f;
  ok.presence_penalty = -1.0f;
  EXPECT_TRUE(e->add_request({1, 2, 3}, ok).ok());
  EXPECT_EQ(run_all(*e).size(), 2u);
}

}  // namespace
}  // namespace cadenza::engine
