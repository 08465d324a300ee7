// Scheduler unit tests with the real KvCacheManager and no model: token budget, sequence cap,
// chunked prefill, decode priority over prompt chunks, priority classes, prefix-cache admission,
// preemption and resumption, aborts, and long random runs that check every invariant (including
// a simulated KV memory that must hold the right tokens) and that every request finishes.
#include "sched/scheduler.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

namespace cadenza::sched {
namespace {

std::unique_ptr<Request> make_request(RequestId id, std::vector<int32_t> prompt, int32_t max_tokens,
                                      int32_t priority = 0) {
  auto r = std::make_unique<Request>();
  r->id = id;
  r->num_prompt_tokens = static_cast<int32_t>(prompt.size());
  r->tokens = std::move(prompt);
  r->params.max_tokens = max_tokens;
  r->priority = priority;
  return r;
}

std::vector<int32_t> distinct_prompt(RequestId id, int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>(id * 100000 + i);
  return t;
}

// A fake model over the plan: checks that every position a scheduled token attends to holds the
// right content in a simulated KV memory, writes the new positions, and "samples" a token that
// depends only on the sequence so far (as a greedy model would).
class FakeEngine {
 public:
  FakeEngine(Scheduler& s, kv::KvCacheManager& kv)
      : sched_(s), kv_(kv), memory_(static_cast<size_t>(kv.num_blocks() * kv.block_size()), 0) {}

  // Runs one step; returns the finished requests, aborted ones included (moved out of the plan).
  std::vector<std::unique_ptr<Request>> step(SchedulePlan* out_plan = nullptr) {
    SchedulePlan plan = sched_.schedule();
    check_plan(plan);
    const int32_t B = kv_.block_size();
    for (const ScheduledRequest& e : plan.scheduled) {
      const Request& r = *e.request;
      for (int32_t p = 0; p < e.start; ++p) {
        const size_t slot = static_cast<size_t>(e.block_table[static_cast<size_t>(p / B)] * B + p % B);
        EXPECT_EQ(memory_[slot], content(r, p)) << "request " << r.id << " position " << p;
      }
      for (int32_t p = e.start; p < e.start + e.num_tokens; ++p) {
        const size_t slot = static_cast<size_t>(e.block_table[static_cast<size_t>(p / B)] * B + p % B);
        memory_[slot] = content(r, p);
      }
    }
    sched_.commit(plan);
    std::vector<std::unique_ptr<Request>> done;
    for (const ScheduledRequest& e : plan.scheduled) {
      if (!e.sample) continue;
      Request& r = *e.request;
      r.tokens.push_back(next_token(r));
      ++samples;
      if (r.num_output_tokens() >= r.params.max_tokens)
        done.push_back(sched_.finish(r.id, FinishReason::kLength));
    }
    for (auto& a : plan.aborted) done.push_back(std::move(a));
    ++steps;
    if (out_plan) *out_plan = std::move(plan);
    return done;
  }

  static int32_t next_token(const Request& r) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : r.tokens) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
    return static_cast<int32_t>(h % 7);
  }

  int64_t steps = 0, samples = 0;

 private:
  // What a KV slot holds for position p: a hash of tokens [0, p] (the K/V depend on the prefix).
  static uint64_t content(const Request& r, int32_t p) {
    uint64_t h = 1;
    for (int32_t i = 0; i <= p; ++i) h = h * 1000003u + static_cast<uint32_t>(r.tokens[static_cast<size_t>(i)]) + 7;
    return h;
  }

  void check_plan(const SchedulePlan& plan) {
    const SchedulerConfig& c = sched_.config();
    EXPECT_LE(plan.num_batched_tokens, c.max_num_batched_tokens);
    EXPECT_LE(static_cast<int32_t>(sched_.running().size()), c.max_num_seqs);
    std::set<RequestId> ids;
    int32_t total = 0;
    for (const ScheduledRequest& e : plan.scheduled) {
      EXPECT_TRUE(ids.insert(e.request->id).second);
      EXPECT_GE(e.num_tokens, 1);
      EXPECT_EQ(e.start, e.request->num_computed_tokens);
      EXPECT_LE(e.start + e.num_tokens, e.request->num_tokens());
      EXPECT_GE(static_cast<int64_t>(e.block_table.size()) * kv_.block_size(), e.start + e.num_tokens);
      EXPECT_EQ(e.request->status, RequestStatus::kRunning);
      total += e.num_tokens;
    }
    EXPECT_EQ(total, plan.num_batched_tokens);
    // Every running request is scheduled unless the budget ran out.
    for (Request* r : sched_.running())
      if (!ids.count(r->id)) {
        EXPECT_GT(r->num_tokens() - r->num_computed_tokens, 1);
      }
    for (Request* r : sched_.waiting()) EXPECT_EQ(r->num_computed_tokens, 0);
  }

  Scheduler& sched_;
  kv::KvCacheManager& kv_;
  std::vector<uint64_t> memory_;
};

TEST(Scheduler, BudgetCapAndChunkedPrefill) {
  kv::KvCacheManager kv({.num_blocks = 256, .block_size = 16});
  Scheduler s({.max_num_batched_tokens = 64, .max_num_seqs = 3}, kv);
  for (RequestId id = 1; id <= 6; ++id) s.add(make_request(id, distinct_prompt(id, 100), 4));
  FakeEngine engine(s, kv);
  SchedulePlan plan;
  engine.step(&plan);
  ASSERT_EQ(plan.scheduled.size(), 1u);  // the first prompt takes the whole budget
  EXPECT_EQ(plan.scheduled[0].num_tokens, 64);
  EXPECT_FALSE(plan.scheduled[0].sample);
  engine.step(&plan);
  ASSERT_EQ(plan.scheduled.size(), 2u);  // its last 36 tokens, then 28 of the next prompt
  EXPECT_EQ(plan.scheduled[0].num_tokens, 36);
  EXPECT_TRUE(plan.scheduled[0].sample);
  EXPECT_EQ(plan.scheduled[1].request->id, 2u);
  EXPECT_EQ(plan.scheduled[1].num_tokens, 28);
  int finished = 0;
  while (s.has_work()) {
    finished += static_cast<int>(engine.step().size());
    ASSERT_LT(engine.steps, 100);
  }
  EXPECT_EQ(finished, 6);
  EXPECT_EQ(s.stats().num_preemptions, 0);
  EXPECT_EQ(kv.usage(), 0.0);
}

TEST(Scheduler, LongPromptNeverStallsDecodes) {
  kv::KvCacheManager kv({.num_blocks = 256, .block_size = 16});
  Scheduler s({.max_num_batched_tokens = 32, .max_num_seqs = 8}, kv);
  FakeEngine engine(s, kv);
  s.add(make_request(1, distinct_prompt(1, 5), 50));
  engine.step();  // request 1 is now decoding
  s.add(make_request(2, distinct_prompt(2, 1000), 2));
  for (int i = 0; i < 30; ++i) {  // 1000 / 31 steps: request 2 is still in its prompt
    SchedulePlan plan;
    engine.step(&plan);
    ASSERT_FALSE(plan.scheduled.empty());
    EXPECT_EQ(plan.scheduled[0].request->id, 1u);
    EXPECT_EQ(plan.scheduled[0].num_tokens, 1);
    if (plan.scheduled.size() > 1) {
      EXPECT_EQ(plan.scheduled[1].num_tokens, 31);
    }
  }
}

// Images whose tokens attend to each other both ways (ImageInput::bidirectional) are computed in
// one step: no prompt chunk ends inside one, beside a decoding request that takes a token of
// every step's budget; a causal image at the same place is cut like text.
TEST(Scheduler, BidirectionalImagesAreNeverCut) {
  for (bool bidirectional : {true, false}) {
    SCOPED_TRACE(bidirectional ? "bidirectional" : "causal");
    kv::KvCacheManager kv({.num_blocks = 256, .block_size = 16});
    Scheduler s({.max_num_batched_tokens = 24, .max_num_seqs = 4}, kv);
    FakeEngine engine(s, kv);
    s.add(make_request(1, distinct_prompt(1, 5), 60));
    engine.step();  // request 1 decodes from now on
    auto r = make_request(2, distinct_prompt(2, 100), 2);
    for (int32_t at : {20, 50}) {
      ImageInput im;
      im.position = at;
      im.num_tokens = 16;
      im.bidirectional = bidirectional;
      r->images.push_back(im);
    }
    s.add(std::move(r));
    bool cut_inside = false, finished = false;
    while (!finished) {
      SchedulePlan plan;
      // The plan points at requests that finished this step: keep them alive while it is read.
      const auto done_now = engine.step(&plan);
      for (const auto& done : done_now) finished |= done->id == 2;
      for (const ScheduledRequest& e : plan.scheduled) {
        if (e.request->id != 2) continue;
        const int32_t end = e.start + e.num_tokens;
        for (int32_t at : {20, 50}) cut_inside |= end > at && end < at + 16;
      }
      ASSERT_LT(engine.steps, 100);
    }
    EXPECT_EQ(cut_inside, !bidirectional);
  }
}

TEST(Scheduler, PriorityClassThenArrival) {
  kv::KvCacheManager kv({.num_blocks = 64, .block_size = 16});
  Scheduler s({.max_num_batched_tokens = 64, .max_num_seqs = 1}, kv);
  s.add(make_request(1, distinct_prompt(1, 8), 1, /*priority=*/2));
  s.add(make_request(2, distinct_prompt(2, 8), 1, /*priority=*/1));
  s.add(make_request(3, distinct_prompt(3, 8), 1, /*priority=*/2));
  s.add(make_request(4, distinct_prompt(4, 8), 1, /*priority=*/1));
  FakeEngine engine(s, kv);
  std::vector<RequestId> order;
  while (s.has_work())
    for (auto& r : engine.step()) order.push_back(r->id);
  EXPECT_EQ(order, (std::vector<RequestId>{2, 4, 1, 3}));
}

TEST(Scheduler, AdmissionStartsAfterTheCachedPrefix) {
  kv::KvCacheManager kv({.num_blocks = 64, .block_size = 16});
  Scheduler s({.max_num_batched_tokens = 512, .max_num_seqs = 4}, kv);
  FakeEngine engine(s, kv);
  std::vector<int32_t> shared = distinct_prompt(9, 100);
  std::vector<int32_t> a = shared, b = shared;
  a.push_back(1);
  b.push_back(2);
  b.push_back(3);
  s.add(make_request(1, a, 2));
  while (s.has_work()) engine.step();
  s.add(make_request(2, b, 2));
  SchedulePlan plan;
  engine.step(&plan);
  ASSERT_EQ(plan.scheduled.size(), 1u);
  EXPECT_EQ(plan.scheduled[0].start, 96);  // 6 full blocks of the shared 100 tokens
  EXPECT_EQ(plan.scheduled[0].num_tokens, 102 - 96);
  EXPECT_EQ(plan.scheduled[0].request->num_cached_prompt_tokens, 96);
  while (s.has_work()) engine.step();
  EXPECT_EQ(kv.stats().hits, 1);
}

TEST(Scheduler, PreemptsTheLatestArrivalAndResumes) {
  // 8 blocks of 4 tokens; three requests that each grow to 4 blocks.
  kv::KvCacheManager kv({.num_blocks = 8, .block_size = 4, .enable_prefix_caching = false});
  Scheduler s({.max_num_batched_tokens = 64, .max_num_seqs = 8}, kv);
  FakeEngine engine(s, kv);
  for (RequestId id = 1; id <= 3; ++id) s.add(make_request(id, distinct_prompt(id, 6), 10));
  std::map<RequestId, std::vector<int32_t>> outputs;
  bool saw_preemption = false;
  while (s.has_work()) {
    SchedulePlan plan;
    for (auto& r : engine.step(&plan)) outputs[r->id].assign(r->output().begin(), r->output().end());
    for (RequestId id : plan.preempted) {
      saw_preemption = true;
      EXPECT_EQ(id, 3u);  // the least important running request is always the latest arrival
      EXPECT_EQ(s.find(id)->num_computed_tokens, 0);
      EXPECT_EQ(s.find(id)->status, RequestStatus::kPreempted);
    }
    ASSERT_LT(engine.steps, 200);
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_GT(s.stats().num_preemptions, 0);
  ASSERT_EQ(outputs.size(), 3u);
  // The same outputs as with room for everyone.
  kv::KvCacheManager big_kv({.num_blocks = 64, .block_size = 4});
  Scheduler big(s.config(), big_kv);
  FakeEngine big_engine(big, big_kv);
  for (RequestId id = 1; id <= 3; ++id) big.add(make_request(id, distinct_prompt(id, 6), 10));
  while (big.has_work())
    for (auto& r : big_engine.step())
      EXPECT_EQ(outputs[r->id], std::vector<int32_t>(r->output().begin(), r->output().end()));
  EXPECT_EQ(big.stats().num_preemptions, 0);
}

TEST(Scheduler, AbortFreesBlocksAtTheNextStep) {
  kv::KvCacheManager kv({.num_blocks = 32, .block_size = 4});
  Scheduler s({.max_num_batched_tokens = 16, .max_num_seqs = 2}, kv);
  FakeEngine engine(s, kv);
  for (RequestId id = 1; id <= 4; ++id) s.add(make_request(id, distinct_prompt(id, 10), 100));
  engine.step();
  engine.step();
  EXPECT_GT(kv.usage(), 0.0);
  EXPECT_FALSE(s.abort(99));
  for (RequestId id = 1; id <= 4; ++id) EXPECT_TRUE(s.abort(id));
  EXPECT_GT(kv.usage(), 0.0);  // not before the next step
  SchedulePlan plan;
  auto done = engine.step(&plan);
  EXPECT_TRUE(plan.scheduled.empty());
  ASSERT_EQ(done.size(), 4u);
  for (auto& r : done) EXPECT_EQ(r->finish_reason, FinishReason::kAbort);
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(kv.usage(), 0.0);
  EXPECT_EQ(kv.num_free_blocks(), 32);
}

TEST(Scheduler, ValidatesItsConfig) {
  EXPECT_FALSE(validate({.max_num_batched_tokens = 4, .max_num_seqs = 8}).ok());
  EXPECT_FALSE(validate({.max_num_batched_tokens = 4, .max_num_seqs = 0}).ok());
  EXPECT_TRUE(validate({.max_num_batched_tokens = 8, .max_num_seqs = 8}).ok());
}

// Long random runs: random arrivals, prompt and output lengths, priorities, shared prefixes
// (a 4-token vocabulary makes hash hits common), aborts, and a pool small enough to preempt.
// Every invariant is checked each step; every request must finish, and within a priority class
// first admissions follow arrival order (FCFS, no overtaking).
void random_run(uint32_t seed, bool priorities) {
  SCOPED_TRACE(testing::Message() << "seed " << seed << " priorities " << priorities);
  std::mt19937 rng(seed);
  const int32_t B = 4;
  kv::KvCacheManager kv({.num_blocks = 48, .block_size = B});
  Scheduler s({.max_num_batched_tokens = 24, .max_num_seqs = 6}, kv);
  FakeEngine engine(s, kv);
  RequestId next_id = 1;
  const int kRequests = 300;
  std::map<RequestId, std::pair<int32_t, uint64_t>> first_admission;  // id -> (priority, seq)
  std::map<int32_t, uint64_t> last_admitted_seq;                      // per class
  int finished = 0;
  std::set<RequestId> aborted;
  while ((next_id <= kRequests || s.has_work())) {
    if (next_id <= kRequests && rng() % 3 == 0) {
      const int32_t len = 1 + static_cast<int32_t>(rng() % 60);
      std::vector<int32_t> prompt(static_cast<size_t>(len));
      for (auto& t : prompt) t = static_cast<int32_t>(rng() % 4);
      const int32_t out = 1 + static_cast<int32_t>(rng() % 40);  // prompt + out <= 100 tokens = 25 blocks
      const int32_t prio = priorities ? static_cast<int32_t>(rng() % 3) : 0;
      s.add(make_request(next_id++, prompt, out, prio));
    }
    if (rng() % 97 == 0 && next_id > 1) {
      const RequestId victim = 1 + rng() % (next_id - 1);
      if (s.abort(victim)) aborted.insert(victim);
    }
    SchedulePlan plan;
    auto done = engine.step(&plan);
    for (const ScheduledRequest& e : plan.scheduled) {
      const Request& r = *e.request;
      if (first_admission.count(r.id)) continue;
      first_admission[r.id] = {r.priority, r.arrival_seq};
      auto [it, inserted] = last_admitted_seq.emplace(r.priority, r.arrival_seq);
      if (!inserted) {
        EXPECT_GT(r.arrival_seq, it->second) << "request " << r.id << " overtook an older one";
        it->second = r.arrival_seq;
      }
    }
    for (auto& r : done) {
      ++finished;
      if (r->finish_reason == FinishReason::kAbort) {
        EXPECT_TRUE(aborted.count(r->id));
      } else {
        EXPECT_EQ(r->num_output_tokens(), r->params.max_tokens);
      }
    }
    ASSERT_LT(engine.steps, 20000) << "no progress";
  }
  EXPECT_EQ(finished, kRequests);
  EXPECT_EQ(kv.usage(), 0.0);
  EXPECT_EQ(kv.num_free_blocks(), 48);
  EXPECT_GT(s.stats().num_preemptions, 0);
  EXPECT_GT(kv.stats().hits, 0);
}

TEST(Scheduler, LongRandomRunsFinishEveryRequest) {
  for (uint32_t seed = 1; seed <= 6; ++seed) random_run(seed, seed % 2 == 0);
}

// Speculative decoding: drafts the engine appended ride on the decode token within the budget
// left after prompt chunks, the rest are dropped; rollback keeps the accepted positions only.
TEST(SchedulerDrafts, DraftsFillTheBudgetAndRollBack) {
  kv::KvCacheManager kv({.num_blocks = 64, .block_size = 4, .enable_prefix_caching = true});
  Scheduler s({.max_num_batched_tokens = 6, .max_num_seqs = 4}, kv);
  Request& a = s.add(make_request(1, distinct_prompt(1, 3), 20));
  Request& b = s.add(make_request(2, distinct_prompt(2, 3), 20));
  SchedulePlan plan = s.schedule();
  ASSERT_EQ(plan.num_batched_tokens, 6);
  s.commit(plan);
  a.tokens.push_back(7);
  b.tokens.push_back(8);
  for (Request* r : {&a, &b}) {  // four drafts each
    for (int32_t d = 0; d < 4; ++d) r->tokens.push_back(10 + d);
    r->num_draft_tokens = 4;
  }
  plan = s.schedule();
  ASSERT_EQ(plan.scheduled.size(), 2u);
  // Both decode tokens first (2), then a's four drafts use the rest; b's are dropped.
  EXPECT_EQ(plan.num_batched_tokens, 6);
  EXPECT_EQ(plan.scheduled[0].request, &a);
  EXPECT_EQ(plan.scheduled[0].num_tokens, 5);
  EXPECT_EQ(plan.scheduled[0].num_draft_tokens, 4);
  EXPECT_TRUE(plan.scheduled[0].sample);
  EXPECT_EQ(plan.scheduled[1].num_tokens, 1);
  EXPECT_EQ(plan.scheduled[1].num_draft_tokens, 0);
  EXPECT_TRUE(plan.scheduled[1].sample);
  EXPECT_EQ(b.num_draft_tokens, 0);
  EXPECT_EQ(b.num_tokens(), 4);
  EXPECT_EQ(kv.block_table(1).size(), 2u);  // positions 0..7
  s.commit(plan);
  EXPECT_EQ(a.num_computed_tokens, 8);
  // The engine: the first draft accepted, then the target's token.
  a.drop_drafts();
  a.tokens.push_back(10);
  a.tokens.push_back(99);
  b.tokens.push_back(9);  // b sampled plainly
  const kv::BlockCopy copy = s.rollback(1, 5);  // the last real token and one draft
  EXPECT_EQ(copy.num_tokens, 0);
  EXPECT_EQ(a.num_computed_tokens, 5);
  EXPECT_EQ(kv.num_computed(1), 5);
  EXPECT_EQ(kv.num_tokens(1), 5);
  EXPECT_EQ(kv.block_table(1).size(), 2u);
  plan = s.schedule();  // a decodes position 5 next
  ASSERT_EQ(plan.scheduled.size(), 2u);
  EXPECT_EQ(plan.scheduled[0].start, 5);
  EXPECT_EQ(plan.scheduled[0].num_tokens, 1);
}

TEST(SchedulerDrafts, DraftsNeverPreemptAndLeaveWithAnAbort) {
  // Two blocks of 4: the request holds one (positions 0..3); drafts may take the free one only.
  kv::KvCacheManager kv({.num_blocks = 2, .block_size = 4, .enable_prefix_caching = false});
  Scheduler s({.max_num_batched_tokens = 64, .max_num_seqs = 4}, kv);
  Request& a = s.add(make_request(1, distinct_prompt(1, 3), 5));
  SchedulePlan plan = s.schedule();
  s.commit(plan);
  a.tokens.push_back(7);
  for (int32_t d = 0; d < 8; ++d) a.tokens.push_back(10 + d);
  a.num_draft_tokens = 8;
  plan = s.schedule();
  ASSERT_EQ(plan.scheduled.size(), 1u);
  EXPECT_EQ(plan.scheduled[0].num_tokens, 5);  // positions 3..7: all the pool has
  EXPECT_EQ(plan.scheduled[0].num_draft_tokens, 4);
  EXPECT_TRUE(plan.preempted.empty());
  EXPECT_EQ(a.num_tokens(), 8);
  s.commit(plan);
  a.drop_drafts();
  a.tokens.push_back(50);
  s.rollback(1, 4);  // nothing accepted
  EXPECT_EQ(kv.num_free_blocks(), 1);
  // An abort applied while drafts are attached hands the request back without them.
  for (int32_t d = 0; d < 3; ++d) a.tokens.push_back(10 + d);
  a.num_draft_tokens = 3;
  ASSERT_TRUE(s.abort(1));
  plan = s.schedule();
  ASSERT_EQ(plan.aborted.size(), 1u);
  EXPECT_EQ(plan.aborted[0]->num_tokens(), 5);
  EXPECT_EQ(plan.aborted[0]->num_draft_tokens, 0);
  EXPECT_EQ(kv.num_free_blocks(), 2);
}

}  // namespace
}  // namespace cadenza::sched
