// Speculative decoding with a draft model (SpeculativeMethod::kDraft, spec::DraftModelProposer
// built by EngineCore::create): greedy output equals plain greedy output token for token, alone and
// batched, under preemption with a small KV pool; both KV pools are empty afterwards; a model
// drafting for itself has every draft accepted (the catch-up and rollback bookkeeping is exact);
// start-up errors for a missing, unreadable or foreign-vocabulary draft. On the synthesized tiny
// model and on every shared golden model, paired with itself and with its same-vocabulary siblings
// (the licenses model with its own weights quantized to Q4_0: the self-drafting recipe).
#include <unistd.h>

#include <filesystem>
#include <map>

#include "engine_test_util.h"
#include "quantize/quantize.h"
#include "shared_data.h"
#include "spec/draft_model_proposer.h"

namespace cadenza::engine {
namespace {

namespace fs = std::filesystem;
using test_util::Generation;
using test_util::greedy;
using test_util::random_prompt;

// Always k drafts (adaptive off: on these compute-bound tiny models the policy would stop
// drafting, which is right for speed but leaves nothing to check).
EngineConfig with_draft(EngineConfig c, const std::string& path, int32_t k = 4) {
  c.speculative = {.method = SpeculativeMethod::kDraft, .num_speculative_tokens = k,
                   .adaptive = false, .draft_model = path};
  return c;
}

// Every prompt submitted at once, stepped until idle: the tokens of each, in prompt order.
std::vector<std::vector<int32_t>> run_batch(EngineCore& e, const std::vector<std::vector<int32_t>>& prompts,
                                            const SamplingParams& p) {
  std::vector<RequestId> ids;
  for (const auto& prompt : prompts) {
    auto id = e.add_request(prompt, p);
    EXPECT_TRUE(id.ok()) << id.error();
    ids.push_back(id ? *id : 0);
  }
  std::map<RequestId, Generation> g = test_util::run(e);
  std::vector<std::vector<int32_t>> out;
  for (RequestId id : ids) {
    EXPECT_EQ(g[id].reason, FinishReason::kLength);
    out.push_back(g[id].tokens);
  }
  return out;
}

std::vector<std::vector<int32_t>> run_each(EngineCore& e, const std::vector<std::vector<int32_t>>& prompts,
                                           const SamplingParams& p) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& prompt : prompts) out.push_back(run_batch(e, {prompt}, p)[0]);
  return out;
}

const spec::DraftModelProposer* draft_of(const EngineCore& e) {
  return dynamic_cast<const spec::DraftModelProposer*>(e.proposer());
}

// Both pools whole: the target's blocks back, the draft's released for every finished request.
void expect_pools_empty(const EngineCore& e) {
  EXPECT_EQ(e.kv_manager().num_free_blocks(), e.kv_manager().num_blocks());
  EXPECT_EQ(e.stats().kv_usage, 0.0);
  const spec::DraftModelProposer* d = draft_of(e);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->num_used_kv_blocks(), 0);
  EXPECT_EQ(d->num_requests(), 0u);
}

// Plain vs draft-speculative greedy on `l`, alone and batched, and batched again with a pool
// small enough to preempt. Returns the engine stats of the speculative runs (alone + batched).
EngineStats check_matches_plain(model::Model& model, const Tokenizer& tok, const std::string& draft,
                                const std::vector<std::vector<int32_t>>& prompts, int32_t max_tokens,
                                int32_t max_model_len) {
  const SamplingParams p = greedy(max_tokens);
  EngineConfig base{.num_kv_blocks = 64, .max_num_batched_tokens = 64, .max_num_seqs = 8,
                    .max_model_len = max_model_len};
  auto plain = EngineCore::create(model, tok, base);
  auto spec = EngineCore::create(model, tok, with_draft(base, draft));
  EXPECT_TRUE(plain.ok()) << plain.error();
  EXPECT_TRUE(spec.ok()) << spec.error();
  if (!plain || !spec) return {};
  const auto expected = run_each(**plain, prompts, p);
  EXPECT_EQ(run_each(**spec, prompts, p), expected) << "alone";
  EXPECT_EQ(run_batch(**spec, prompts, p), expected) << "batched";
  expect_pools_empty(**spec);
  const EngineStats stats = (*spec)->stats();
  EXPECT_GT(stats.num_spec_drafts, 0);

  // A pool of one max_model_len sequence for 6 running requests and a small token budget:
  // preemption, chunked prompts beside drafts, partial drafts, a full draft pool; prefix caching
  // on (the target shares blocks, the draft does not) and off.
  for (bool caching : {true, false}) {
    SCOPED_TRACE(caching ? "small pool, prefix caching" : "small pool, no prefix caching");
    const int32_t seq_blocks = (max_model_len + 15) / 16;
    EngineConfig small{.num_kv_blocks = seq_blocks, .enable_prefix_caching = caching,
                       .max_num_batched_tokens = 12, .max_num_seqs = 6, .max_model_len = max_model_len};
    auto tight = EngineCore::create(model, tok, with_draft(small, draft, 3));
    EXPECT_TRUE(tight.ok()) << tight.error();
    if (!tight) continue;
    // Six prompts of half the context each (a prompt repeated and cut): three times the pool.
    std::vector<std::vector<int32_t>> many;
    for (size_t i = 0; i < 6; ++i) {
      const std::vector<int32_t>& unit = prompts[i % prompts.size()];
      std::vector<int32_t> m;
      while (m.size() < static_cast<size_t>(max_model_len / 2)) m.insert(m.end(), unit.begin(), unit.end());
      m.resize(static_cast<size_t>(max_model_len / 2 - static_cast<int32_t>(i)));
      many.push_back(std::move(m));
    }
    const auto many_expected = run_each(**plain, many, p);
    EXPECT_EQ(run_batch(**tight, many, p), many_expected);
    EXPECT_GT((*tight)->stats().num_preemptions, 0);
    EXPECT_GT((*tight)->stats().num_spec_drafts, 0);
    expect_pools_empty(**tight);
  }
  return stats;
}

class DraftEngineTest : public test_util::EngineTest {
 protected:
  static void SetUpTestSuite() {
    test_util::EngineTest::SetUpTestSuite();
    // Same vocabulary, other weights: a draft that is often wrong.
    other_ = new fs::path(fs::temp_directory_path() / ("engine-draft-other-" + std::to_string(::getpid()) + ".gguf"));
    auto w = synth::write_synthetic_model(test::tiny_model_options(4), other_->string());
    ASSERT_TRUE(w.ok()) << w.error();
    synth::SynthOptions wide = test::tiny_model_options(4);
    wide.shape.n_vocab = 320;
    wide_ = new fs::path(fs::temp_directory_path() / ("engine-draft-wide-" + std::to_string(::getpid()) + ".gguf"));
    w = synth::write_synthetic_model(wide, wide_->string());
    ASSERT_TRUE(w.ok()) << w.error();
  }
  static void TearDownTestSuite() {
    for (fs::path* p : {other_, wide_}) {
      if (!p) continue;
      fs::remove(*p);
      delete p;
    }
    other_ = wide_ = nullptr;
    test_util::EngineTest::TearDownTestSuite();
  }
  static std::vector<std::vector<int32_t>> prompts() {
    std::vector<std::vector<int32_t>> p;
    for (uint32_t i = 0; i < 4; ++i) p.push_back(random_prompt(5 + 19 * i, 70 + i));
    return p;
  }
  static inline fs::path* other_ = nullptr;
  static inline fs::path* wide_ = nullptr;
};

// The model drafting for itself: every draft is the target's greedy token, so every one is
// accepted, and each verification emits k + 1 tokens (k may be shorter near max_tokens).
TEST_F(DraftEngineTest, SelfDraftingAcceptsEveryDraft) {
  const EngineStats s = check_matches_plain(*loaded_->model, *loaded_->tokenizer, path_, prompts(), 40, 256);
  EXPECT_GT(s.num_spec_draft_tokens, 0);
  EXPECT_EQ(s.num_spec_accepted_tokens, s.num_spec_draft_tokens);
  EXPECT_EQ(s.num_spec_emitted_tokens, s.num_spec_accepted_tokens + s.num_spec_drafts);
}

TEST_F(DraftEngineTest, OtherDraftModelKeepsTheOutput) {
  const EngineStats s = check_matches_plain(*loaded_->model, *loaded_->tokenizer, other_->string(), prompts(), 40, 128);
  EXPECT_LT(s.num_spec_accepted_tokens, s.num_spec_draft_tokens);  // random weights disagree
}

TEST_F(DraftEngineTest, StartUpErrors) {
  EngineConfig base{.num_kv_blocks = 64, .max_model_len = 256};
  auto error = [&](const EngineConfig& c) {
    auto e = EngineCore::create(*loaded_->model, *loaded_->tokenizer, c);
    EXPECT_FALSE(e.ok());
    return e.ok() ? std::string() : e.error();
  };
  EngineConfig none = base;
  none.speculative.method = SpeculativeMethod::kDraft;
  EXPECT_NE(error(none).find("engine: speculative: method draft needs a draft model file"), std::string::npos);
  const std::string missing = error(with_draft(base, "/nonexistent/draft.gguf"));
  EXPECT_NE(missing.find("/nonexistent/draft.gguf"), std::string::npos) << missing;
  const std::string vocab = error(with_draft(base, wide_->string()));
  EXPECT_NE(vocab.find("vocabulary of 320 tokens, target " + path_ + " has 300"), std::string::npos) << vocab;
  EngineConfig ngram_with_file = with_draft(base, path_);
  ngram_with_file.speculative.method = SpeculativeMethod::kNgram;
  EXPECT_NE(error(ngram_with_file).find("only used with method draft"), std::string::npos);
}

// Sampled requests speculate too (the engine's rejection sampling takes each draft as a point
// mass): with the model drafting for itself the draft is the target's argmax, accepted with the
// target's probability of it; both pools are empty afterwards. Adaptive k (the default) runs too.
TEST_F(DraftEngineTest, SampledRequestsAndAdaptiveK) {
  for (bool adaptive : {false, true}) {
    SCOPED_TRACE(adaptive ? "adaptive" : "fixed k");
    EngineConfig c = with_draft({.num_kv_blocks = 64, .max_model_len = 256}, path_);
    c.speculative.adaptive = adaptive;
    auto spec = engine(c);
    ASSERT_NE(spec, nullptr);
    SamplingParams sampled = greedy(24);
    sampled.temperature = 0.8f;
    sampled.seed = 3;
    std::vector<std::vector<int32_t>> ps;
    for (uint32_t i = 0; i < 3; ++i) ps.push_back(random_prompt(12 + 5 * i, 5 + i));
    const auto got = run_batch(*spec, ps, sampled);
    for (const auto& g : got) EXPECT_EQ(g.size(), 24u);
    if (!adaptive) {
      EXPECT_GT(spec->stats().num_spec_drafts, 0);
      EXPECT_GT(spec->stats().num_spec_accepted_tokens, 0);
    }
    // Greedy with adaptive k still gives the plain output.
    auto plain = engine({.num_kv_blocks = 64, .max_model_len = 256});
    EXPECT_EQ(run_batch(*spec, ps, greedy(24)), run_batch(*plain, ps, greedy(24)));
    expect_pools_empty(*spec);
  }
}

// Every shared golden model drafting for itself (acceptance 1.0) and, where the shared set has a
// same-vocabulary sibling, drafted by it.
TEST(DraftShared, EveryGoldenModelWithItselfAndItsSiblings) {
  CADENZA_REQUIRE_SHARED();
  const fs::path models = test::shared_dir() / "models";
  // The licenses model's own weights at Q4_0: the self-drafting recipe of docs/speculative.md.
  const fs::path q4 = fs::temp_directory_path() / ("draft-licenses-q4_0-" + std::to_string(::getpid()) + ".gguf");
  quantize::Options qo;
  qo.input = (models / "licenses-tiny-f16.gguf").string();
  qo.output = q4.string();
  qo.target = *quantize::parse_target("q4_0");
  auto q = quantize::quantize_model(qo);
  ASSERT_TRUE(q.ok()) << q.error();

  const std::map<std::string, std::vector<std::string>> siblings = {
      {"licenses-tiny-f16", {q4.string()}},
      {"small-llama-spm-Q8_0", {(models / "small-llama-spm-Q4_0.gguf").string()}},
      {"small-llama-spm-Q4_K_M", {(models / "small-llama-spm-Q4_0.gguf").string()}},
      {"tiny-llama-spm-f16", {(models / "small-llama-spm-Q4_0.gguf").string()}},
  };
  for (const std::string& name : test::shared_model_names()) {
    SCOPED_TRACE(name);
    const fs::path path = models / (name + ".gguf");
    auto l = test_util::load(path.string());
    ASSERT_NE(l, nullptr);
    const Tokenizer& tok = *l->tokenizer;
    const std::vector<std::vector<int32_t>> prompts = {
        tok.encode("one two three four five six. one two three", true, false),
        tok.encode("The licence grants you the right to copy, modify and distribute", true, false),
        tok.encode("Once upon a time, number 7!", true, false),
    };
    {
      SCOPED_TRACE("drafting for itself");
      const EngineStats s = check_matches_plain(*l->model, tok, path.string(), prompts, 20, 128);
      EXPECT_GT(s.num_spec_draft_tokens, 0);
      EXPECT_EQ(s.num_spec_accepted_tokens, s.num_spec_draft_tokens);
    }
    if (auto it = siblings.find(name); it != siblings.end()) {
      for (const std::string& draft : it->second) {
        SCOPED_TRACE("drafted by " + draft);
        check_matches_plain(*l->model, tok, draft, prompts, 20, 128);
      }
    }
  }
  {
    // Another vocabulary: a start-up error naming both files and the difference.
    auto l = test_util::load((models / "tiny-llama-spm-f16.gguf").string());
    ASSERT_NE(l, nullptr);
    const std::string qwen = (models / "tiny-qwen2-f16.gguf").string();
    auto e = EngineCore::create(*l->model, *l->tokenizer,
                                with_draft({.num_kv_blocks = 64, .max_model_len = 128}, qwen));
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.error().find("draft model " + qwen + ": vocabulary of 151936 tokens, target " +
                             (models / "tiny-llama-spm-f16.gguf").string() + " has 32000"),
              std::string::npos)
        << e.error();
  }
  fs::remove(q4);
}

}  // namespace
}  // namespace cadenza::engine
