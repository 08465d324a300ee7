// Constrained decoding in the engine (SamplingParams::grammar): every output is a sentence of the
// grammar, sampled at temperature 1 from a random-weight model; and the engine's invariants hold
// with a grammar: the same tokens alone, batched, preempted and forked (n > 1); speculation
// changes no greedy token and keeps sampled output valid.
#include <regex>

#include <gtest/gtest.h>

#include "engine_test_util.h"
#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_index.h"

namespace cadenza::engine {
namespace {

using test_util::EngineTest;
using test_util::Generation;
using test_util::random_prompt;
using test_util::run;

// A small JSON-like record; the regex below is its independent check.
constexpr const char* kRecordGbnf = R"(
root ::= "{\"id\": " digits ", \"tag\": \"" word "\", \"ok\": " bool "}"
digits ::= [1-9] [0-9]{0,3}
word ::= [a-z]{1,6}
bool ::= "true" | "false"
)";
const std::regex kRecordRegex(R"(\{"id": [1-9][0-9]{0,3}, "tag": "[a-z]{1,6}", "ok": (true|false)\})");

class ConstrainedTest : public EngineTest {
 protected:
  static std::shared_ptr<const grammar::CompiledGrammar> compile(const char* gbnf) {
    static std::shared_ptr<const grammar::TokenIndex> index =
        grammar::TokenIndex::from_tokenizer(*loaded_->tokenizer);
    auto g = grammar::compile_gbnf(gbnf, index);
    EXPECT_TRUE(g.ok()) << g.error();
    return g ? *g : nullptr;
  }
  static SamplingParams sampled(uint64_t seed, int32_t max_tokens = 64) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    p.max_tokens = max_tokens;
    p.grammar = compile(kRecordGbnf);
    return p;
  }
};

TEST_F(ConstrainedTest, EverySampledOutputIsASentenceOfTheGrammar) {
  auto e = engine({.max_num_seqs = 16, .max_model_len = 256});
  std::vector<RequestId> ids;
  for (uint64_t seed = 0; seed < 40; ++seed)
    ids.push_back(*e->add_request(random_prompt(12, static_cast<uint32_t>(seed)), sampled(seed)));
  auto got = run(*e);
  for (RequestId id : ids) {
    const Generation& g = got[id];
    SCOPED_TRACE(g.text);
    EXPECT_EQ(g.reason, FinishReason::kStop);
    EXPECT_TRUE(std::regex_match(g.text, kRecordRegex));
  }
  EXPECT_EQ(e->stats().kv_usage, 0.0);
}

TEST_F(ConstrainedTest, UnconstrainedOutputOfTheSameModelIsNot) {
  // The check above can fail: without the grammar the random model writes no such record.
  auto e = engine({.max_model_len = 256});
  SamplingParams p = sampled(1);
  p.grammar = nullptr;
  p.ignore_eos = true;
  auto g = test_util::run_alone(*e, random_prompt(12, 1), p);
  EXPECT_FALSE(std::regex_match(g.text, kRecordRegex));
}

TEST_F(ConstrainedTest, SameTokensAloneBatchedAndPreempted) {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 8; ++i) prompts.push_back(random_prompt(20 + i * 4, 500 + i));
  auto alone = engine({.num_kv_blocks = 128, .max_num_seqs = 1, .max_model_len = 128});
  auto batched = engine({.num_kv_blocks = 128, .max_num_seqs = 8, .max_model_len = 128});
  auto small = engine({.num_kv_blocks = 8, .max_num_seqs = 8, .max_model_len = 128});
  std::vector<Generation> expected;
  for (size_t i = 0; i < prompts.size(); ++i)
    expected.push_back(test_util::run_alone(*alone, prompts[i], sampled(100 + i, 48)));
  for (EngineCore* e : {batched.get(), small.get()}) {
    std::vector<RequestId> ids;
    for (size_t i = 0; i < prompts.size(); ++i)
      ids.push_back(*e->add_request(prompts[i], sampled(100 + i, 48)));
    auto got = run(*e);
    for (size_t i = 0; i < prompts.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(got[ids[i]].tokens, expected[i].tokens);
      EXPECT_EQ(got[ids[i]].text, expected[i].text);
    }
  }
  EXPECT_GT(small->stats().num_preemptions, 0);
}

TEST_F(ConstrainedTest, ParallelSamplesEachFollowTheGrammarAndEqualSingleRuns) {
  auto e = engine({.max_num_seqs = 8, .max_model_len = 256});
  const auto prompt = random_prompt(16, 77);
  SamplingParams p = sampled(40);
  p.n = 4;
  auto id = e->add_request(prompt, p);
  ASSERT_TRUE(id.ok()) << id.error();
  std::vector<Generation> samples(4);
  while (e->has_work())
    for (RequestOutput& out : e->step()) {
      Generation& g = samples[static_cast<size_t>(out.index)];
      g.tokens.insert(g.tokens.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      g.text += out.text;
      if (out.finished) g.reason = out.finish_reason;
    }
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(std::regex_match(samples[static_cast<size_t>(i)].text, kRecordRegex))
        << samples[static_cast<size_t>(i)].text;
    auto single = engine({.max_model_len = 256});
    auto g = test_util::run_alone(*single, prompt, sampled(40 + static_cast<uint64_t>(i)));
    EXPECT_EQ(samples[static_cast<size_t>(i)].tokens, g.tokens);
  }
}

TEST_F(ConstrainedTest, SpeculationKeepsGreedyTokensAndValidOutput) {
  const SpeculativeConfig ngram{.method = SpeculativeMethod::kNgram,
                                .num_speculative_tokens = 4, .ngram_min = 1, .ngram_max = 3,
                                .adaptive = false};
  auto plain = engine({.max_model_len = 256});
  auto spec = engine({.max_model_len = 256, .speculative = ngram});
  for (uint64_t seed = 0; seed < 6; ++seed) {
    SCOPED_TRACE(seed);
    // A repetitive prompt so that n-gram drafts exist; greedy and sampled requests both.
    std::vector<int32_t> prompt;
    for (int r = 0; r < 4; ++r)
      for (char c : std::string("{\"id\": 12, \"tag\": \"ab\", \"ok\": true}"))
        prompt.push_back(static_cast<unsigned char>(c));
    // Greedy: the very tokens of plain decoding. Sampled: rejection sampling keeps the
    // distribution, not the tokens, so only validity is checked.
    SamplingParams p = sampled(seed);
    const bool greedy = seed % 2 == 0;
    if (greedy) p.temperature = 0;
    auto a = test_util::run_alone(*plain, prompt, p);
    auto b = test_util::run_alone(*spec, prompt, p);
    if (greedy) {
      EXPECT_EQ(a.tokens, b.tokens);
    }
    EXPECT_EQ(b.reason, FinishReason::kStop);
    EXPECT_TRUE(std::regex_match(b.text, kRecordRegex)) << b.text;
  }
  EXPECT_GT(spec->stats().num_spec_drafts, 0);
}

TEST_F(ConstrainedTest, LogprobsSeeTheMask) {
  auto e = engine({.max_model_len = 256});
  SamplingParams p = sampled(3);
  p.logprobs = 20;
  auto id = e->add_request(random_prompt(10, 3), p);
  ASSERT_TRUE(id.ok());
  std::vector<TokenLogprob> lps;
  std::vector<int32_t> tokens;
  while (e->has_work())
    for (RequestOutput& out : e->step()) {
      lps.insert(lps.end(), out.logprobs.begin(), out.logprobs.end());
      tokens.insert(tokens.end(), out.new_token_ids.begin(), out.new_token_ids.end());
    }
  ASSERT_EQ(lps.size(), tokens.size());
  ASSERT_FALSE(tokens.empty());
  // Replayed through a matcher of its own: at every step the top entries with a finite logprob
  // are exactly the allowed ones among them, and the chosen token is allowed.
  grammar::GrammarMatcher m(p.grammar);
  std::vector<uint32_t> mask(m.mask_words());
  for (size_t i = 0; i < tokens.size(); ++i) {
    SCOPED_TRACE(i);
    m.fill_next_token_bitmask(mask);
    auto allowed = [&](int32_t t) { return (mask[static_cast<size_t>(t) / 32] >> (t % 32)) & 1u; };
    EXPECT_TRUE(allowed(tokens[i]));
    EXPECT_TRUE(std::isfinite(lps[i].logprob));
    for (const TopLogprob& t : lps[i].top)
      EXPECT_EQ(std::isfinite(t.logprob), static_cast<bool>(allowed(t.token))) << t.token;
    ASSERT_TRUE(m.accept_token(tokens[i]));
  }
}

TEST_F(ConstrainedTest, MinTokensPastTheGrammarsEndStopsInsteadOfHanging) {
  // The grammar completes after one token; min_tokens forbids end-of-generation: the request
  // ends (stop) rather than sampling from an empty distribution.
  auto e = engine({.max_model_len = 256});
  SamplingParams p = sampled(5);
  p.grammar = compile("root ::= \"a\" \"b\"?");
  p.min_tokens = 10;
  p.max_tokens = 20;
  auto g = test_util::run_alone(*e, random_prompt(8, 5), p);
  EXPECT_EQ(g.reason, FinishReason::kStop);
  EXPECT_TRUE(g.text == "a" || g.text == "ab") << g.text;
  EXPECT_EQ(e->stats().kv_usage, 0.0);
}

}  // namespace
}  // namespace cadenza::engine
