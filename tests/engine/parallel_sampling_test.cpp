// EngineConfig::parallel_sampling: the requests of a step drawn in parallel on the backend's
// thread pool give the tokens (and logprobs) of drawing them one after another, for every kind
// of sampling in one batch: greedy, temperature alone, top-k, top-p, min-p, penalties, logit bias,
// logprobs, and n > 1 (forked samples share a row and take the serial path).
#include <vector>

#include <gtest/gtest.h>

#include "engine_test_util.h"
#include "util/thread_pool.h"

namespace cadenza::engine {
namespace {

using test_util::EngineTest;
using test_util::Key;

class ParallelSamplingTest : public EngineTest {
 protected:
  // The mixed batch: 16 requests started together (so steps draw many rows at once), every
  // sampling path, seeds that differ per request.
  static std::vector<SamplingParams> mixed() {
    std::vector<SamplingParams> ps;
    for (int i = 0; i < 16; ++i) {
      SamplingParams p;
      p.max_tokens = 12;
      p.ignore_eos = true;
      p.seed = 1000 + static_cast<uint64_t>(i);
      p.temperature = 0.8f;
      p.top_k = 0;
      p.top_p = 1.0f;
      p.min_p = 0.0f;
      switch (i % 8) {
        case 0: p.temperature = 0; break;               // greedy
        case 1: break;                                   // every token, no filter
        case 2: p.top_k = 5; break;
        case 3: p.top_p = 0.9f; break;
        case 4: p.min_p = 0.1f; p.temperature = 1.5f; break;
        case 5: p.repetition_penalty = 1.3f; p.frequency_penalty = 0.5f; p.logprobs = 3; break;
        case 6: p.logit_bias = {{7, 5.0f}, {9, -3.0f}}; p.logprobs = 0; p.top_k = 40; break;
        case 7: p.n = 2; p.top_p = 0.95f; break;        // forked samples: the serial path
      }
      ps.push_back(p);
    }
    return ps;
  }

  static std::map<Key, test_util::Generation> run_batch(bool parallel,
                                                        std::map<Key, std::vector<TokenLogprob>>* lp) {
    EngineConfig c;
    c.max_num_seqs = 32;
    c.parallel_sampling = parallel;
    auto e = engine(c);
    if (!e) return {};
    const std::vector<SamplingParams> ps = mixed();
    for (size_t i = 0; i < ps.size(); ++i) {
      auto id = e->add_request(test_util::random_prompt(5 + i, static_cast<uint32_t>(i)), ps[i]);
      EXPECT_TRUE(id.ok()) << id.error();
    }
    return test_util::run_all(*e, lp);
  }
};

TEST_F(ParallelSamplingTest, SameTokensAndLogprobsAsSequential) {
  ThreadPool* pool = loaded_->model->backend().host_pool();
  ASSERT_NE(pool, nullptr) << "the CPU backend lends its pool";
  ASSERT_GE(pool->size(), 2) << "the fixture's backend has 2 threads: the parallel path runs";
  std::map<Key, std::vector<TokenLogprob>> lp_seq, lp_par;
  const auto seq = run_batch(false, &lp_seq);
  const auto par = run_batch(true, &lp_par);
  ASSERT_EQ(seq.size(), 16u + 2u);  // 16 requests, the last two with two samples each
  ASSERT_EQ(par.size(), seq.size());
  bool sampled_differs_from_greedy = false;
  for (const auto& [key, g] : seq) {
    SCOPED_TRACE("request " + std::to_string(key.first) + " sample " + std::to_string(key.second));
    const auto it = par.find(key);
    ASSERT_NE(it, par.end());
    EXPECT_EQ(it->second.tokens, g.tokens);
    EXPECT_EQ(it->second.text, g.text);
    EXPECT_EQ(it->second.reason, g.reason);
    EXPECT_EQ(g.tokens.size(), 12u);
    if (g.tokens != seq.begin()->second.tokens) sampled_differs_from_greedy = true;
    const auto& a = lp_seq[key];
    const auto& b = lp_par[key];
    ASSERT_EQ(a.size(), b.size());
    for (size_t t = 0; t < a.size(); ++t) {
      EXPECT_EQ(a[t].token, b[t].token);
      EXPECT_EQ(a[t].logprob, b[t].logprob);
      EXPECT_EQ(a[t].rank, b[t].rank);
      ASSERT_EQ(a[t].top.size(), b[t].top.size());
      for (size_t j = 0; j < a[t].top.size(); ++j) {
        EXPECT_EQ(a[t].top[j].token, b[t].top[j].token);
        EXPECT_EQ(a[t].top[j].logprob, b[t].top[j].logprob);
      }
    }
  }
  EXPECT_TRUE(sampled_differs_from_greedy) << "the batch must exercise random draws";
  EXPECT_FALSE(lp_seq.empty());
}

// Sampling is per request: a request drawn alongside 15 others on the pool gives the tokens it
// gives alone (serially, one row per step).
TEST_F(ParallelSamplingTest, BatchedEqualsAlone) {
  const std::vector<SamplingParams> ps = mixed();
  EngineConfig c;
  c.max_num_seqs = 32;
  auto batched = engine(c);
  ASSERT_NE(batched, nullptr);
  std::vector<RequestId> ids;
  for (size_t i = 0; i < ps.size(); ++i)
    ids.push_back(*batched->add_request(test_util::random_prompt(5 + i, static_cast<uint32_t>(i)), ps[i]));
  const auto all = test_util::run_all(*batched);
  for (size_t i = 0; i < ps.size(); i += 3) {
    auto alone = engine(c);
    ASSERT_NE(alone, nullptr);
    const RequestId id = *alone->add_request(test_util::random_prompt(5 + i, static_cast<uint32_t>(i)), ps[i]);
    const auto one = test_util::run_all(*alone);
    for (int32_t k = 0; k < ps[i].n; ++k)
      EXPECT_EQ(one.at({id, k}).tokens, all.at({ids[i], k}).tokens) << "request " << i << " sample " << k;
  }
}

}  // namespace
}  // namespace cadenza::engine
