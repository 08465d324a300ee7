// Speculative decoding in the engine (engine/speculative.h): greedy output with n-gram drafts is
// the output without them, token for token, alone and batched, on the tiny synthesized model and
// on the trained ../shared licenses-tiny model (prompts that quote licence text, so drafts are
// accepted); stops and max_tokens that fall inside an accepted draft; logprobs; opt-outs; KV
// blocks back in the pool afterwards; config errors.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "chi_square.h"
#include "engine_test_util.h"
#include "shared_data.h"

namespace cadenza::engine {
namespace {

using test_util::EngineTest;
using test_util::Generation;
using test_util::greedy;
using test_util::random_prompt;

// A fixed k (adaptive off): how many drafts run must not depend on the machine's timing.
constexpr SpeculativeConfig kNgram{.method = SpeculativeMethod::kNgram,
                                   .num_speculative_tokens = 4, .ngram_min = 1, .ngram_max = 3,
                                   .adaptive = false};

// One request's run, with how many tokens its outputs carried.
struct SpecRun {
  Generation g;
  std::vector<TokenLogprob> logprobs;
  size_t max_tokens_per_output = 0;
  size_t final_output_tokens = 0;  // tokens of the output that finished it
  std::vector<size_t> group_sizes;  // tokens of each output that carried any
};

// Submits every prompt at once and steps until idle.
std::vector<SpecRun> run_all(EngineCore& e, const std::vector<std::vector<int32_t>>& prompts,
                         const std::vector<SamplingParams>& params) {
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto id = e.add_request(prompts[i], params[i]);
    EXPECT_TRUE(id.ok()) << id.error();
    if (id) index[*id] = i;
  }
  std::vector<SpecRun> runs(prompts.size());
  for (int steps = 0; e.has_work(); ++steps) {
    if (steps > 100000) {
      ADD_FAILURE() << "engine does not finish";
      break;
    }
    for (RequestOutput& out : e.step()) {
      if (out.index != 0) continue;  // n > 1: sample 0 stands for the request
      SpecRun& r = runs[index.at(out.id)];
      EXPECT_EQ(r.g.reason, FinishReason::kNone) << "output after the final one";
      r.g.tokens.insert(r.g.tokens.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      r.g.text += out.text;
      r.logprobs.insert(r.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
      r.max_tokens_per_output = std::max(r.max_tokens_per_output, out.new_token_ids.size());
      if (!out.new_token_ids.empty()) r.group_sizes.push_back(out.new_token_ids.size());
      if (out.finished) {
        r.g.reason = out.finish_reason;
        r.final_output_tokens = out.new_token_ids.size();
      }
    }
  }
  return runs;
}

std::vector<SpecRun> run_all(EngineCore& e, const std::vector<std::vector<int32_t>>& prompts,
                         const SamplingParams& p) {
  return run_all(e, prompts, std::vector<SamplingParams>(prompts.size(), p));
}

// The blocks of every finished request are back (cached ones count as free).
void expect_pool_full(const EngineCore& e) {
  EXPECT_EQ(e.kv_manager().num_free_blocks(), e.kv_manager().num_blocks());
  EXPECT_EQ(e.stats().kv_usage, 0.0);
}

void expect_same_tokens(const std::vector<SpecRun>& got, const std::vector<SpecRun>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].g.tokens, expected[i].g.tokens) << "request " << i;
    EXPECT_EQ(got[i].g.text, expected[i].g.text) << "request " << i;
    EXPECT_EQ(got[i].g.reason, expected[i].g.reason) << "request " << i;
  }
}

// A prompt that repeats itself, so that the continuation is likely to quote it.
std::vector<int32_t> repeating_prompt(size_t period, size_t copies, uint32_t seed) {
  const std::vector<int32_t> unit = random_prompt(period, seed);
  std::vector<int32_t> p;
  for (size_t c = 0; c < copies; ++c) p.insert(p.end(), unit.begin(), unit.end());
  return p;
}

TEST(SpeculativeConfigTest, MethodNames) {
  EXPECT_EQ(*parse_speculative_method("ngram"), SpeculativeMethod::kNgram);
  EXPECT_EQ(*parse_speculative_method("none"), SpeculativeMethod::kNone);
  EXPECT_EQ(*parse_speculative_method("draft"), SpeculativeMethod::kDraft);
  auto bad = parse_speculative_method("eagle");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("expected none, ngram or draft"), std::string::npos) << bad.error();
  EXPECT_STREQ(to_string(SpeculativeMethod::kNgram), "ngram");
  EXPECT_STREQ(to_string(SpeculativeMethod::kDraft), "draft");
}

TEST(SpeculativeConfigTest, DraftModelGoesWithMethodDraft) {
  SpeculativeConfig c{.method = SpeculativeMethod::kDraft};
  EXPECT_NE(validate(c).error().find("method draft needs a draft model file"), std::string::npos);
  c.draft_model = "d.gguf";
  EXPECT_TRUE(validate(c).ok());
  c.num_speculative_tokens = 0;
  EXPECT_FALSE(validate(c).ok());
  for (SpeculativeMethod m : {SpeculativeMethod::kNone, SpeculativeMethod::kNgram}) {
    SpeculativeConfig other{.method = m, .draft_model = "d.gguf"};
    const Status st = validate(other);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().find("a draft model (d.gguf) is only used with method draft"),
              std::string::npos) << st.error();
  }
}

TEST(SpeculativeConfigTest, RangesAreChecked) {
  EXPECT_TRUE(validate(SpeculativeConfig{}).ok());
  // Method none ignores the other fields.
  EXPECT_TRUE(validate(SpeculativeConfig{.num_speculative_tokens = 0}).ok());
  SpeculativeConfig c = kNgram;
  EXPECT_TRUE(validate(c).ok());
  c.num_speculative_tokens = 0;
  EXPECT_NE(validate(c).error().find("num_speculative_tokens 0 must be in [1, 32]"), std::string::npos);
  c.num_speculative_tokens = 33;
  EXPECT_FALSE(validate(c).ok());
  c = kNgram;
  c.ngram_min = 4;
  EXPECT_NE(validate(c).error().find("ngram_min 4 must be in [1, ngram_max = 3]"), std::string::npos);
  c = kNgram;
  c.ngram_max = 33;
  EXPECT_FALSE(validate(c).ok());
}

TEST_F(EngineTest, SpeculativeBadConfigIsAStartUpError) {
  EngineConfig config{.num_kv_blocks = 64, .max_model_len = 256};
  config.speculative = kNgram;
  config.speculative.num_speculative_tokens = 40;
  auto e = EngineCore::create(*loaded_->model, *loaded_->tokenizer, config);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("engine: speculative: num_speculative_tokens 40"), std::string::npos)
      << e.error();
}

TEST_F(EngineTest, SpeculativeGreedyEqualsPlainAloneAndBatched) {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 3; ++i) prompts.push_back(repeating_prompt(12 + i, 4, 10 + i));
  for (uint32_t i = 0; i < 3; ++i) prompts.push_back(random_prompt(30 + 7 * i, 20 + i));
  const SamplingParams p = greedy(40);

  auto plain = engine({.num_kv_blocks = 96, .max_model_len = 256});
  ASSERT_NE(plain, nullptr);
  std::vector<SpecRun> expected;
  for (const auto& prompt : prompts) expected.push_back(run_all(*plain, {prompt}, p)[0]);

  EngineConfig config{.num_kv_blocks = 96, .max_model_len = 256};
  config.speculative = kNgram;
  auto spec = engine(config);
  ASSERT_NE(spec, nullptr);
  const int32_t free_at_start = spec->kv_manager().num_free_blocks();
  std::vector<SpecRun> alone;
  for (const auto& prompt : prompts) alone.push_back(run_all(*spec, {prompt}, p)[0]);
  expect_same_tokens(alone, expected);
  EXPECT_EQ(spec->kv_manager().num_free_blocks(), free_at_start);

  std::vector<SpecRun> batched = run_all(*spec, prompts, p);
  expect_same_tokens(batched, expected);
  expect_pool_full(*spec);

  const EngineStats s = spec->stats();
  EXPECT_GT(s.num_spec_drafts, 0);
  EXPECT_GE(s.num_spec_draft_tokens, s.num_spec_drafts);
  EXPECT_LE(s.num_spec_accepted_tokens, s.num_spec_draft_tokens);
  // Each verification emits its accepted drafts and one more (no stop cut these short).
  EXPECT_EQ(s.num_spec_emitted_tokens, s.num_spec_accepted_tokens + s.num_spec_drafts);
  // Per position: the counts add up to the totals, and a later position never accepts more.
  int64_t drafted = 0, accepted = 0;
  for (size_t i = 0; i < s.spec_draft_tokens_per_position.size(); ++i) {
    drafted += s.spec_draft_tokens_per_position[i];
    accepted += s.spec_accepted_per_position[i];
    EXPECT_LE(s.spec_accepted_per_position[i], s.spec_draft_tokens_per_position[i]);
    if (i > 0) {
      EXPECT_LE(s.spec_accepted_per_position[i], s.spec_accepted_per_position[i - 1]);
    }
  }
  EXPECT_EQ(drafted, s.num_spec_draft_tokens);
  EXPECT_EQ(accepted, s.num_spec_accepted_tokens);
  EXPECT_EQ(s.spec_draft_tokens_per_position[0], s.num_spec_drafts);
  EXPECT_EQ(s.num_generated_tokens, 2 * 6 * 40);
}

// A small token budget cuts drafts short (partial drafts), a small pool preempts speculating
// requests; prefix caching off and on. The output stays the plain one.
TEST_F(EngineTest, SpeculativeUnderTightBudgetAndPreemption) {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 6; ++i)
    prompts.push_back(i % 2 ? random_prompt(40, 50 + i) : repeating_prompt(10, 5, 60 + i));
  const SamplingParams p = greedy(48);
  auto plain = engine({.num_kv_blocks = 96, .max_model_len = 128});
  ASSERT_NE(plain, nullptr);
  std::vector<SpecRun> expected;
  for (const auto& prompt : prompts) expected.push_back(run_all(*plain, {prompt}, p)[0]);

  for (bool caching : {true, false}) {
    SCOPED_TRACE(caching ? "prefix caching" : "no prefix caching");
    // 8 blocks of 16 = one 128-token sequence: six requests of ~100 tokens must preempt.
    EngineConfig config{.num_kv_blocks = 16, .enable_prefix_caching = caching,
                        .max_num_batched_tokens = 10, .max_num_seqs = 6, .max_model_len = 128};
    config.speculative = kNgram;
    auto spec = engine(config);
    ASSERT_NE(spec, nullptr);
    std::vector<SpecRun> got = run_all(*spec, prompts, p);
    expect_same_tokens(got, expected);
    expect_pool_full(*spec);
    EXPECT_GT(spec->stats().num_preemptions, 0);
    EXPECT_GT(spec->stats().num_spec_drafts, 0);
  }
}

TEST_F(EngineTest, SpeculativeOptOutsDoNotDraft) {
  EngineConfig config{.num_kv_blocks = 64, .max_model_len = 256};
  config.speculative = kNgram;
  auto spec = engine(config);
  auto plain = engine({.num_kv_blocks = 64, .max_model_len = 256});
  ASSERT_TRUE(spec && plain);
  const std::vector<int32_t> prompt = repeating_prompt(8, 6, 3);

  SamplingParams off = greedy(24);
  off.speculative = false;
  SamplingParams sampled_off = off;
  sampled_off.temperature = 0.9f;
  sampled_off.seed = 7;
  for (const SamplingParams& p : {off, sampled_off}) {
    const std::vector<SpecRun> got = run_all(*spec, {prompt}, p);
    const std::vector<SpecRun> expected = run_all(*plain, {prompt}, p);
    expect_same_tokens(got, expected);
  }
  EXPECT_EQ(spec->stats().num_spec_drafts, 0);
  expect_pool_full(*spec);
}

// Every output of every sample, by sample index.
std::map<int32_t, Generation> run_samples(EngineCore& e, const std::vector<int32_t>& prompt,
                                          const SamplingParams& p) {
  auto id = e.add_request(prompt, p);
  EXPECT_TRUE(id.ok()) << id.error();
  std::map<int32_t, Generation> by_index;
  for (int steps = 0; e.has_work() && steps < 100000; ++steps)
    for (RequestOutput& out : e.step()) {
      Generation& g = by_index[out.index];
      g.tokens.insert(g.tokens.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      g.text += out.text;
      if (out.finished) g.reason = out.finish_reason;
    }
  return by_index;
}

// n > 1: each forked sample speculates on its own; greedy samples all equal the plain output.
TEST_F(EngineTest, SpeculativeParallelSamplesGreedyMatchPlain) {
  EngineConfig config{.num_kv_blocks = 64, .max_model_len = 256};
  auto plain = engine(config);
  config.speculative = kNgram;
  auto spec = engine(config);
  ASSERT_TRUE(spec && plain);
  for (uint32_t seed : {3u, 4u}) {
    const std::vector<int32_t> prompt = repeating_prompt(8, 6, seed);
    SamplingParams p = greedy(24);
    p.n = 3;
    const auto expected = run_samples(*plain, prompt, p);
    const auto got = run_samples(*spec, prompt, p);
    ASSERT_EQ(got.size(), 3u);
    ASSERT_EQ(expected.size(), 3u);
    for (int32_t i = 0; i < 3; ++i) {
      EXPECT_EQ(got.at(i).tokens, expected.at(i).tokens) << "sample " << i;
      EXPECT_EQ(got.at(i).text, expected.at(i).text) << "sample " << i;
      EXPECT_EQ(got.at(i).reason, expected.at(i).reason) << "sample " << i;
    }
  }
  EXPECT_GT(spec->stats().num_spec_drafts, 0);
  EXPECT_GT(spec->stats().num_spec_accepted_tokens, 0);
  expect_pool_full(*spec);
}

// The trained model, prompts quoting held-out licence text: drafts are accepted, often several
// per step, so stops and max_tokens fall inside accepted drafts.
class SpeculativeLicenses : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (test::shared_dir().empty()) return;
    const auto path = test::shared_dir() / "models" / "licenses-tiny-f16.gguf";
    ASSERT_TRUE(std::filesystem::exists(path)) << path << " missing from ../shared";
    loaded_ = test_util::load(path.string()).release();
    std::ifstream in(test::shared_dir() / "text" / "heldout-licenses.txt");
    std::stringstream ss;
    ss << in.rdbuf();
    text_ = new std::string(ss.str());
  }
  static void TearDownTestSuite() {
    delete loaded_;
    loaded_ = nullptr;
    delete text_;
    text_ = nullptr;
  }
  void SetUp() override {
    CADENZA_REQUIRE_SHARED();
    ASSERT_NE(loaded_, nullptr);
  }

  static std::unique_ptr<EngineCore> engine(bool speculate, int32_t budget = 2048) {
    EngineConfig config{.num_kv_blocks = 256, .max_num_batched_tokens = budget, .max_num_seqs = 8,
                        .max_model_len = 512};
    if (speculate) config.speculative = kNgram;
    auto e = EngineCore::create(*loaded_->model, *loaded_->tokenizer, config);
    EXPECT_TRUE(e.ok()) << e.error();
    return e ? std::move(*e) : nullptr;
  }

  // A licence passage, then its first line again: the model tends to continue the quote.
  static std::vector<int32_t> quoting_prompt(size_t offset, size_t chars) {
    const std::string passage = text_->substr(offset, chars);
    const std::string head = passage.substr(0, passage.find('\n') + 1);
    return loaded_->tokenizer->encode(passage + "\n" + head, true, false);
  }

  static std::vector<std::vector<int32_t>> prompts() {
    std::vector<std::vector<int32_t>> p;
    for (size_t i = 0; i < 4; ++i) p.push_back(quoting_prompt(1000 + 20000 * i, 600));
    // Plain prose without the quote: fewer drafts accepted.
    p.push_back(loaded_->tokenizer->encode("The quick brown fox jumps over the lazy dog", true, false));
    return p;
  }

  static inline test_util::Loaded* loaded_ = nullptr;
  static inline std::string* text_ = nullptr;
};

// Temperature > 0 (rejection sampling): over many seeds, the tokens at each output position,
// and the pairs at the first two, are distributed as without speculation (two-sample chi-square at
// significance 1e-4; the seeds are fixed, so the test is deterministic). Drafts must be accepted
// and rejected often enough to exercise both branches of the rule; the pool is full afterwards.
// The power of the check against a wrong rule: SamplerVerify.TheTestDetectsABiasedAcceptanceRule.
TEST_F(SpeculativeLicenses, SampledTokensAreDistributedAsPlain) {
  constexpr int kRuns = 400;
  constexpr int32_t kLen = 6;
  const std::vector<int32_t> prompt = quoting_prompt(41000, 500);
  auto histograms = [&](EngineCore& e) {
    std::vector<SamplingParams> params;
    for (int i = 0; i < kRuns; ++i) {
      SamplingParams p;  // top-k 40, top-p 0.95, min-p 0.05 (the defaults)
      p.temperature = 0.6f;  // cooler than the default 0.8: the quote is followed, drafts accepted
      p.max_tokens = kLen;
      p.ignore_eos = true;
      p.seed = 1000 + static_cast<uint64_t>(i);
      params.push_back(p);
    }
    const std::vector<SpecRun> runs =
        run_all(e, std::vector<std::vector<int32_t>>(kRuns, prompt), params);
    std::vector<std::map<int32_t, int64_t>> h(kLen + 1);
    for (const SpecRun& r : runs) {
      EXPECT_EQ(r.g.tokens.size(), static_cast<size_t>(kLen));
      if (r.g.tokens.size() != static_cast<size_t>(kLen)) continue;
      for (int32_t i = 0; i < kLen; ++i) ++h[static_cast<size_t>(i)][r.g.tokens[static_cast<size_t>(i)]];
      ++h[kLen][r.g.tokens[0] * 32768 + r.g.tokens[1]];  // the pair (the vocab is < 32768)
    }
    return h;
  };
  ASSERT_LT(loaded_->model->config().n_vocab, 32768);  // the pairs' keys
  auto plain = engine(false);
  auto spec = engine(true);
  ASSERT_TRUE(plain && spec);
  const auto expected = histograms(*plain);
  const auto got = histograms(*spec);
  for (size_t i = 0; i < expected.size(); ++i) {
    const cadenza::test_util::ChiSquare x = cadenza::test_util::chi_square_two_sample(expected[i], got[i]);
    EXPECT_TRUE(x.same()) << (i < kLen ? "position " + std::to_string(i) : std::string("pairs"))
                          << ": chi2 " << x.statistic << " > " << x.critical << " (df " << x.df << ")";
    EXPECT_GT(x.df, 0) << "a degenerate histogram tests nothing";
  }
  const EngineStats s = spec->stats();
  // Both branches of the rule ran often (measured: 100 of 531 drafts accepted).
  EXPECT_GT(s.num_spec_accepted_tokens, 50) << "too few accepted drafts";
  EXPECT_GT(s.num_spec_draft_tokens - s.num_spec_accepted_tokens, 50) << "too few rejected drafts";
  expect_pool_full(*spec);
}

// With a fixed k, n-gram drafts depend only on a request's own history, so a seed gives the
// same sampled tokens alone and batched with others.
TEST_F(SpeculativeLicenses, SampledWithASeedIsTheSameAloneAndBatched) {
  auto spec = engine(true);
  ASSERT_NE(spec, nullptr);
  std::vector<SamplingParams> params;
  for (size_t i = 0; i < prompts().size(); ++i) {
    SamplingParams p;
    p.temperature = 0.7f;
    p.max_tokens = 40;
    p.seed = 77 + i;
    params.push_back(p);
  }
  std::vector<SpecRun> alone;
  for (size_t i = 0; i < prompts().size(); ++i) alone.push_back(run_all(*spec, {prompts()[i]}, {params[i]})[0]);
  expect_same_tokens(run_all(*spec, prompts(), params), alone);
  EXPECT_GT(spec->stats().num_spec_accepted_tokens, 0);
  expect_pool_full(*spec);
}

// Adaptive k (the default): whatever the timing makes it choose per step, greedy output is the
// plain output and the pool is whole; the counters stay consistent.
TEST_F(SpeculativeLicenses, AdaptiveGreedyEqualsPlain) {
  EngineConfig config{.num_kv_blocks = 256, .max_num_seqs = 8, .max_model_len = 512};
  auto plain = EngineCore::create(*loaded_->model, *loaded_->tokenizer, config);
  config.speculative = kNgram;
  config.speculative.adaptive = true;
  auto adaptive = EngineCore::create(*loaded_->model, *loaded_->tokenizer, config);
  ASSERT_TRUE(plain.ok() && adaptive.ok());
  const SamplingParams p = greedy(96);
  for (int round = 0; round < 2; ++round) {  // the second round starts with a fitted cost model
    expect_same_tokens(run_all(**adaptive, prompts(), p), run_all(**plain, prompts(), p));
    expect_pool_full(**adaptive);
  }
  const EngineStats s = (*adaptive)->stats();
  EXPECT_LE(s.num_spec_accepted_tokens, s.num_spec_draft_tokens);
  for (size_t i = 1; i < s.spec_draft_tokens_per_position.size(); ++i)
    EXPECT_LE(s.spec_draft_tokens_per_position[i], s.spec_draft_tokens_per_position[i - 1]);
}

TEST_F(SpeculativeLicenses, GreedyEqualsPlainAloneAndBatched) {
  auto plain = engine(false);
  auto spec = engine(true);
  auto spec_small = engine(true, 12);  // partial drafts, prompt chunks beside the drafts
  ASSERT_TRUE(plain && spec && spec_small);
  const auto ps = prompts();
  const SamplingParams p = greedy(64);
  std::vector<SpecRun> expected, alone;
  for (const auto& prompt : ps) {
    expected.push_back(run_all(*plain, {prompt}, p)[0]);
    alone.push_back(run_all(*spec, {prompt}, p)[0]);
  }
  expect_same_tokens(alone, expected);
  expect_same_tokens(run_all(*spec, ps, p), expected);
  expect_same_tokens(run_all(*spec_small, ps, p), expected);
  expect_pool_full(*spec);
  expect_pool_full(*spec_small);
  const EngineStats s = spec->stats();
  // The tiny model quotes only loosely: about a fifth of the drafts are accepted.
  EXPECT_GT(s.num_spec_accepted_tokens, s.num_spec_draft_tokens / 10)
      << "licence quotes should be drafted well: " << s.num_spec_accepted_tokens << " of "
      << s.num_spec_draft_tokens;
  size_t multi = 0;
  for (const SpecRun& r : alone) multi += r.max_tokens_per_output > 1;
  EXPECT_GT(multi, 0u) << "no step emitted more than one token";
}

TEST_F(SpeculativeLicenses, LogprobsAndPenaltiesMatchPlain) {
  auto plain = engine(false);
  auto spec = engine(true);
  ASSERT_TRUE(plain && spec);
  const auto ps = prompts();
  SamplingParams p = greedy(32);
  p.logprobs = 3;
  SamplingParams pen = greedy(32);
  pen.repetition_penalty = 1.1f;
  pen.logit_bias = {{13, -1.5f}};
  for (const SamplingParams& params : {p, pen}) {
    const std::vector<SpecRun> expected = run_all(*plain, ps, params);
    const std::vector<SpecRun> got = run_all(*spec, ps, params);
    expect_same_tokens(got, expected);
    for (size_t i = 0; i < ps.size(); ++i) {
      ASSERT_EQ(got[i].logprobs.size(), expected[i].logprobs.size());
      for (size_t t = 0; t < got[i].logprobs.size(); ++t) {
        EXPECT_EQ(got[i].logprobs[t].token, expected[i].logprobs[t].token);
        EXPECT_EQ(got[i].logprobs[t].top.size(), expected[i].logprobs[t].top.size());
        EXPECT_EQ(got[i].logprobs[t].logprob, expected[i].logprobs[t].logprob);
        EXPECT_EQ(got[i].logprobs[t].rank, expected[i].logprobs[t].rank);
      }
    }
  }
  EXPECT_GT(spec->stats().num_spec_accepted_tokens, 0);
  expect_pool_full(*spec);
}

// Stops (max_tokens, a stop token id, a stop string) placed at tokens that the speculative run
// emitted inside a multi-token step (an accepted draft, not the step's first token): the plain
// result each time, and the finishing output then carries several tokens.
TEST_F(SpeculativeLicenses, StopsInsideAcceptedDrafts) {
  auto plain = engine(false);
  auto spec = engine(true);
  ASSERT_TRUE(plain && spec);
  const auto ps = prompts();
  size_t inside_length = 0, inside_stop_id = 0, inside_stop_str = 0, candidates = 0;
  for (const auto& prompt : ps) {
    const SpecRun base = run_all(*spec, {prompt}, greedy(48))[0];
    ASSERT_EQ(base.g.tokens.size(), 48u);
    // Positions (0-based, into the output) that are not the first token of their step.
    std::vector<size_t> inside;
    size_t at = 0;
    for (size_t g : base.group_sizes) {
      for (size_t j = 1; j < g; ++j) inside.push_back(at + j);
      at += g;
    }
    for (size_t t : inside) {
      if (++candidates > 40) break;  // keeps the test short
      SCOPED_TRACE("position " + std::to_string(t));
      const SpecRun got_len = run_all(*spec, {prompt}, greedy(static_cast<int32_t>(t + 1)))[0];
      expect_same_tokens({got_len}, run_all(*plain, {prompt}, greedy(static_cast<int32_t>(t + 1))));
      inside_length += got_len.final_output_tokens > 1;

      SamplingParams by_id = greedy(48);
      by_id.stop_token_ids = {base.g.tokens[t]};
      const SpecRun got_id = run_all(*spec, {prompt}, by_id)[0];
      expect_same_tokens({got_id}, run_all(*plain, {prompt}, by_id));
      inside_stop_id += got_id.final_output_tokens > 1;

      const std::string piece = loaded_->tokenizer->decode(std::span(base.g.tokens).subspan(t, 1));
      if (piece.find_first_not_of(" \n") == std::string::npos) continue;
      SamplingParams by_str = greedy(48);
      by_str.stop = {piece};
      const SpecRun got_str = run_all(*spec, {prompt}, by_str)[0];
      expect_same_tokens({got_str}, run_all(*plain, {prompt}, by_str));
      EXPECT_EQ(got_str.g.text.find(piece), std::string::npos);
      inside_stop_str += got_str.final_output_tokens > 1;
    }
  }
  EXPECT_GT(inside_length, 0u);
  EXPECT_GT(inside_stop_id, 0u);
  EXPECT_GT(inside_stop_str, 0u);
  expect_pool_full(*spec);
}

// Proposes the known plain continuation of a history (when it is a prefix of one of
// `sequences`), with the last draft of every third call made wrong: drafts are then accepted on
// any model, wholly or in part, which n-gram lookup rarely achieves on random-weight models.
class OracleProposer final : public spec::Proposer {
 public:
  OracleProposer(std::vector<std::vector<int32_t>> sequences, int32_t n_vocab)
      : sequences_(std::move(sequences)), n_vocab_(n_vocab) {}
  Status propose(RequestId, std::span<const int32_t> history, int32_t k,
                 std::vector<int32_t>& draft) override {
    draft.clear();
    for (const std::vector<int32_t>& seq : sequences_) {
      if (seq.size() <= history.size() || !std::equal(history.begin(), history.end(), seq.begin()))
        continue;
      const size_t n = std::min(static_cast<size_t>(std::max(k, 0)), seq.size() - history.size());
      draft.assign(seq.begin() + static_cast<ptrdiff_t>(history.size()),
                   seq.begin() + static_cast<ptrdiff_t>(history.size() + n));
      if (!draft.empty() && ++calls_ % 3 == 0) draft.back() = (draft.back() + 1) % n_vocab_;
      return {};
    }
    return {};
  }
  std::string_view name() const override { return "oracle"; }

 private:
  std::vector<std::vector<int32_t>> sequences_;
  int32_t n_vocab_ = 0;
  int64_t calls_ = 0;
};

// Every shared golden model: greedy with drafts equals greedy without, alone and batched, on
// prompts that repeat text and prompts that do not; with n-gram drafts and with oracle drafts
// (accepted on every model).
TEST(SpeculativeShared, EveryGoldenModelMatchesPlain) {
  CADENZA_REQUIRE_SHARED();
  for (const std::string& name : test::shared_model_names()) {
    SCOPED_TRACE(name);
    const auto path = test::shared_dir() / "models" / (name + ".gguf");
    auto l = test_util::load(path.string());
    ASSERT_NE(l, nullptr);
    const Tokenizer& tok = *l->tokenizer;
    std::vector<std::vector<int32_t>> prompts = {
        tok.encode("one two three four five six. one two three four five six. one two three", true, false),
        tok.encode("The licence grants you the right to copy. The licence grants you", true, false),
        tok.encode("Once upon a time, number 7!", true, false),
        tok.encode("A B C D E F G H A B C D E F G H A B C D", true, false),
    };
    const SamplingParams p = greedy(24);
    EngineConfig base{.num_kv_blocks = 64, .max_num_batched_tokens = 64, .max_num_seqs = 8,
                      .max_model_len = 256};
    auto plain = EngineCore::create(*l->model, tok, base);
    EngineConfig with = base;
    with.speculative = kNgram;
    auto spec = EngineCore::create(*l->model, tok, with);
    ASSERT_TRUE(plain.ok() && spec.ok());
    std::vector<SpecRun> expected, alone;
    for (const auto& prompt : prompts) {
      expected.push_back(run_all(**plain, {prompt}, p)[0]);
      alone.push_back(run_all(**spec, {prompt}, p)[0]);
    }
    expect_same_tokens(alone, expected);
    expect_same_tokens(run_all(**spec, prompts, p), expected);
    expect_pool_full(**spec);

    std::vector<std::vector<int32_t>> sequences;
    for (size_t i = 0; i < prompts.size(); ++i) {
      sequences.push_back(prompts[i]);
      sequences.back().insert(sequences.back().end(), expected[i].g.tokens.begin(),
                              expected[i].g.tokens.end());
    }
    auto oracle = EngineCore::create(
        *l->model, tok, with,
        std::make_unique<OracleProposer>(sequences, static_cast<int32_t>(l->model->config().n_vocab)));
    ASSERT_TRUE(oracle.ok()) << oracle.error();
    std::vector<SpecRun> by_oracle;
    for (const auto& prompt : prompts) by_oracle.push_back(run_all(**oracle, {prompt}, p)[0]);
    expect_same_tokens(by_oracle, expected);
    expect_same_tokens(run_all(**oracle, prompts, p), expected);
    expect_pool_full(**oracle);
    const EngineStats s = (*oracle)->stats();
    EXPECT_GT(s.num_spec_accepted_tokens, s.num_spec_draft_tokens / 2);
    EXPECT_LT(s.num_spec_accepted_tokens, s.num_spec_draft_tokens);  // the wrong ones rejected
  }
}

}  // namespace
}  // namespace cadenza::engine
