// spec::DraftModelProposer on tiny synthesized models (no ../shared needed): drafts are the draft
// model's greedy continuation, the incremental bookkeeping (catch-up, rollback of rejected drafts,
// chunked catch-up) gives the drafts a fresh proposer computes from scratch, a full pool is an
// empty draft and no error, release() returns the blocks, bad input gets empty drafts, and
// create() refuses bad options, unreadable files and another vocabulary.
#include "spec/draft_model_proposer.h"

#include <unistd.h>

#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "kernels/cpu/cpu_backend.h"
#include "synth/synth.h"
#include "test_models.h"

namespace cadenza::spec {
namespace {

namespace fs = std::filesystem;

class DraftModelProposerTest : public testing::Test {
 protected:
  static fs::path write(uint64_t seed, int64_t n_vocab, const std::string& tag) {
    synth::SynthOptions opts = test::tiny_model_options(seed);
    opts.shape.n_vocab = n_vocab;
    const fs::path p = fs::temp_directory_path() /
                       ("draft-proposer-" + tag + "-" + std::to_string(::getpid()) + ".gguf");
    auto written = synth::write_synthetic_model(opts, p.string());
    EXPECT_TRUE(written.ok()) << written.error();
    return p;
  }
  static void SetUpTestSuite() {
    target_path_ = new fs::path(write(3, 300, "target"));
    other_path_ = new fs::path(write(5, 300, "other"));
    wide_path_ = new fs::path(write(5, 310, "wide"));
    backend_ = kernels::make_cpu_backend({.n_threads = 2}).release();
    auto m = model::Model::open(target_path_->string(), *backend_);
    ASSERT_TRUE(m.ok()) << m.error();
    target_ = m->release();
    auto t = Tokenizer::from_gguf(target_->file());
    ASSERT_TRUE(t.ok()) << t.error();
    tokenizer_ = t->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete target_;
    delete backend_;
    for (fs::path* p : {target_path_, other_path_, wide_path_}) {
      fs::remove(*p);
      delete p;
    }
  }

  static DraftModelOptions options(const fs::path& path) {
    return {.path = path.string(), .num_speculative_tokens = 4, .num_blocks = 64, .block_size = 16,
            .max_num_seqs = 8, .max_model_len = 256, .max_step_tokens = 64};
  }
  static std::unique_ptr<DraftModelProposer> make(const DraftModelOptions& o) {
    auto p = DraftModelProposer::create(*target_, *tokenizer_, o);
    EXPECT_TRUE(p.ok()) << p.error();
    return p ? std::move(*p) : nullptr;
  }

  static std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % 256);
    return t;
  }

  static inline fs::path* target_path_ = nullptr;
  static inline fs::path* other_path_ = nullptr;
  static inline fs::path* wide_path_ = nullptr;
  static inline kernels::Backend* backend_ = nullptr;
  static inline model::Model* target_ = nullptr;
  static inline Tokenizer* tokenizer_ = nullptr;
};

// The drafts of a fresh proposer for `history` (no state: everything from scratch).
std::vector<int32_t> fresh_drafts(const DraftModelOptions& o, const model::Model& target,
                                  const Tokenizer& tok, std::span<const int32_t> history, int32_t k) {
  auto p = DraftModelProposer::create(target, tok, o);
  EXPECT_TRUE(p.ok()) << p.error();
  std::vector<int32_t> d;
  if (p) {
    EXPECT_TRUE((*p)->propose(1, history, k, d).ok());
  }
  return d;
}

TEST_F(DraftModelProposerTest, DraftsAreTheGreedyContinuationOfTheDraftModel) {
  auto p = make(options(*target_path_));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->name(), "draft");
  std::vector<int32_t> history = random_tokens(20, 1);
  std::vector<int32_t> d;
  ASSERT_TRUE(p->propose(7, history, 4, d).ok());
  ASSERT_EQ(d.size(), 4u);
  // Accepting the drafts one at a time (a k = 1 proposer) walks the same greedy path.
  auto one = make(options(*target_path_));
  std::vector<int32_t> h = history, step;
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(one->propose(7, h, 1, step).ok());
    ASSERT_EQ(step.size(), 1u);
    EXPECT_EQ(step[0], d[i]) << "draft " << i;
    h.push_back(step[0]);
  }
  // k is capped by num_speculative_tokens.
  ASSERT_TRUE(p->propose(8, history, 30, d).ok());
  EXPECT_EQ(d.size(), 4u);
}

// After each call the engine accepts a prefix of the drafts and appends its own token: the
// proposer's rolled-back, caught-up state drafts exactly what a fresh one computes from scratch,
// alone and in a batch, with catch-up chunked by a small max_step_tokens.
TEST_F(DraftModelProposerTest, IncrementalDraftsEqualDraftsFromScratch) {
  for (int32_t step_tokens : {64, 8}) {
    SCOPED_TRACE("max_step_tokens " + std::to_string(step_tokens));
    DraftModelOptions o = options(*other_path_);
    o.max_step_tokens = step_tokens;
    auto p = make(o);
    ASSERT_NE(p, nullptr);
    std::mt19937 rng(9);
    std::vector<std::vector<int32_t>> histories;
    for (uint32_t i = 0; i < 3; ++i) histories.push_back(random_tokens(10 + 17 * i, 40 + i));
    for (int round = 0; round < 6; ++round) {
      std::vector<DraftQuery> queries;
      for (size_t i = 0; i < histories.size(); ++i)
        queries.push_back({static_cast<RequestId>(i + 1), histories[i], static_cast<int32_t>(1 + (round + i) % 4)});
      std::vector<std::vector<int32_t>> drafts(queries.size());
      ASSERT_TRUE(p->propose_batch(queries, drafts).ok());
      for (size_t i = 0; i < histories.size(); ++i) {
        SCOPED_TRACE("round " + std::to_string(round) + " request " + std::to_string(i));
        EXPECT_EQ(drafts[i], fresh_drafts(options(*other_path_), *target_, *tokenizer_, histories[i],
                                          queries[i].max_draft_tokens));
        ASSERT_EQ(drafts[i].size(), static_cast<size_t>(queries[i].max_draft_tokens));
        // Accept a prefix (sometimes all), then a token of "the target's".
        const size_t accept = rng() % (drafts[i].size() + 1);
        histories[i].insert(histories[i].end(), drafts[i].begin(), drafts[i].begin() + static_cast<ptrdiff_t>(accept));
        histories[i].push_back(static_cast<int32_t>(rng() % 256));
      }
    }
    EXPECT_EQ(p->num_requests(), 3u);
    EXPECT_GT(p->num_used_kv_blocks(), 0);
    for (RequestId id : {1, 2, 3}) p->release(id);
    p->release(99);  // unknown: ignored
    EXPECT_EQ(p->num_used_kv_blocks(), 0);
    EXPECT_EQ(p->num_requests(), 0u);
  }
}

// A history that changed further back (not the engine's pattern, but allowed after release):
// the state is rolled back to the common prefix.
TEST_F(DraftModelProposerTest, ChangedHistoryRollsBack) {
  const DraftModelOptions o = options(*other_path_);
  auto p = make(o);
  std::vector<int32_t> h = random_tokens(40, 3);
  std::vector<int32_t> d;
  ASSERT_TRUE(p->propose(1, h, 4, d).ok());
  h.resize(25);
  h.push_back(7);
  ASSERT_TRUE(p->propose(1, h, 4, d).ok());
  EXPECT_EQ(d, fresh_drafts(o, *target_, *tokenizer_, h, 4));
  // The same history again: only its last token is recomputed.
  ASSERT_TRUE(p->propose(1, h, 3, d).ok());
  EXPECT_EQ(d, fresh_drafts(o, *target_, *tokenizer_, h, 3));
}

TEST_F(DraftModelProposerTest, FullPoolIsAnEmptyDraftNotAnError) {
  DraftModelOptions o = options(*other_path_);
  o.num_blocks = 6;  // 96 positions: room for two requests of 41 positions (3 blocks each)
  auto p = make(o);
  std::vector<std::vector<int32_t>> hs = {random_tokens(38, 1), random_tokens(38, 2), random_tokens(38, 3)};
  std::vector<DraftQuery> q;
  for (size_t i = 0; i < hs.size(); ++i) q.push_back({static_cast<RequestId>(i + 1), hs[i], 4});
  std::vector<std::vector<int32_t>> drafts(q.size());
  ASSERT_TRUE(p->propose_batch(q, drafts).ok());
  EXPECT_EQ(drafts[0].size(), 4u);
  EXPECT_EQ(drafts[1].size(), 4u);
  EXPECT_TRUE(drafts[2].empty());
  EXPECT_EQ(p->num_pool_full(), 1);
  // Requests missing from a call lose their KV when the pool is full: request 3 alone fits.
  std::vector<int32_t> d;
  ASSERT_TRUE(p->propose(3, hs[2], 4, d).ok());
  EXPECT_EQ(d.size(), 4u);
  EXPECT_EQ(p->num_requests(), 1u);
  p->release(3);
  EXPECT_EQ(p->num_used_kv_blocks(), 0);
}

TEST_F(DraftModelProposerTest, BadQueriesGetEmptyDrafts) {
  DraftModelOptions o = options(*other_path_);
  o.max_num_seqs = 2;
  o.max_model_len = 32;
  auto p = make(o);
  const std::vector<int32_t> ok = random_tokens(10, 1);
  const std::vector<int32_t> bad_token = {1, 2, 300, 4};  // 300 is outside the vocabulary
  const std::vector<int32_t> negative = {1, -5, 3};
  const std::vector<int32_t> too_long = random_tokens(40, 2);  // past max_model_len
  const std::vector<int32_t> empty;
  std::vector<int32_t> d = {123};
  for (const auto* h : {&bad_token, &negative, &too_long, &empty}) {
    ASSERT_TRUE(p->propose(1, *h, 4, d).ok());
    EXPECT_TRUE(d.empty());
  }
  ASSERT_TRUE(p->propose(1, ok, 0, d).ok());
  EXPECT_TRUE(d.empty());
  ASSERT_TRUE(p->propose(1, ok, -3, d).ok());
  EXPECT_TRUE(d.empty());
  // Near the end of the reach: fewer drafts (positions up to max_model_len - 1).
  ASSERT_TRUE(p->propose(2, random_tokens(30, 3), 4, d).ok());
  EXPECT_EQ(d.size(), 3u);
  // The same id twice, and more queries than max_num_seqs: the extra ones get nothing.
  std::vector<DraftQuery> q = {{5, ok, 2}, {5, ok, 2}, {6, ok, 2}, {7, ok, 2}};
  std::vector<std::vector<int32_t>> drafts(q.size());
  ASSERT_TRUE(p->propose_batch(q, drafts).ok());
  EXPECT_EQ(drafts[0].size(), 2u);
  EXPECT_TRUE(drafts[1].empty());
  EXPECT_EQ(drafts[2].size(), 2u);
  EXPECT_TRUE(drafts[3].empty());
  EXPECT_EQ(drafts[0], drafts[2]);  // same history, same model
  for (RequestId id : {1, 2, 5, 6, 7}) p->release(id);
  EXPECT_EQ(p->num_used_kv_blocks(), 0);
}

TEST_F(DraftModelProposerTest, CreateErrors) {
  auto error = [&](const DraftModelOptions& o) {
    auto p = DraftModelProposer::create(*target_, *tokenizer_, o);
    EXPECT_FALSE(p.ok());
    return p.ok() ? std::string() : p.error();
  };
  DraftModelOptions o = options(*other_path_);
  o.path.clear();
  EXPECT_NE(error(o).find("no file given"), std::string::npos);
  o = options(*other_path_);
  o.num_blocks = 0;
  EXPECT_NE(error(o).find("num_blocks must be >= 1"), std::string::npos);
  o = options(*other_path_);
  o.num_speculative_tokens = 33;
  EXPECT_NE(error(o).find("num_speculative_tokens 33 must be in [1, 32]"), std::string::npos);
  o = options(*other_path_);
  o.max_step_tokens = 4;  // below max_num_seqs
  EXPECT_NE(error(o).find("max_step_tokens 4"), std::string::npos);
  o = options(*other_path_);
  o.max_model_len = 1;
  EXPECT_FALSE(error(o).empty());

  o = options(fs::temp_directory_path() / "no-such-draft.gguf");
  const std::string missing = error(o);
  EXPECT_NE(missing.find("no-such-draft.gguf"), std::string::npos) << missing;
  // Not a GGUF file.
  const fs::path junk = fs::temp_directory_path() / ("draft-junk-" + std::to_string(::getpid()) + ".gguf");
  { std::FILE* f = std::fopen(junk.c_str(), "wb"); std::fputs("not a gguf file at all", f); std::fclose(f); }
  const std::string bad = error(options(junk));
  EXPECT_NE(bad.find(junk.string()), std::string::npos) << bad;
  fs::remove(junk);

  // The same count, one token's text differs: a copy of the target with token 299 renamed.
  const fs::path renamed = fs::temp_directory_path() / ("draft-renamed-" + std::to_string(::getpid()) + ".gguf");
  {
    gguf::GgufWriter w;
    for (const auto& [key, value] : target_->file().metadata()) {
      if (key != "tokenizer.ggml.tokens") {
        w.set(key, value);
        continue;
      }
      auto tokens = target_->file().get_string_array(key);
      ASSERT_TRUE(tokens.ok()) << tokens.error();
      ASSERT_EQ(tokens->size(), 300u);
      (*tokens)[299] = "draft-test-token";
      w.set(key, gguf::Value::string_array(*tokens));
    }
    for (const gguf::TensorInfo& t : target_->file().tensors()) {
      const std::span<const uint8_t> b = t.bytes();
      ASSERT_TRUE(w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(b.begin(), b.end())).ok());
    }
    ASSERT_TRUE(w.write(renamed.string()).ok());
  }
  const std::string text = error(options(renamed));
  EXPECT_NE(text.find("draft model " + renamed.string() + ": token 299 is 'draft-test-token', target " +
                      target_path_->string() + " has '" + tokenizer_->token_text(299) + "'"),
            std::string::npos)
      << text;
  fs::remove(renamed);

  const std::string vocab = error(options(*wide_path_));
  EXPECT_NE(vocab.find("draft model " + wide_path_->string() + ": vocabulary of 310 tokens, target " +
                       target_path_->string() + " has 300"),
            std::string::npos)
      << vocab;
}

}  // namespace
}  // namespace cadenza::spec
