// Images in engine requests (EngineCore::add_request's ImageInput): embeddings at placeholder
// positions in the continuous batch, with chunked prefill across the image, sampling, n > 1,
// preemption-free reuse through the prefix cache keyed by the image digest, and the checks.
#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "engine_test_util.h"
#include "model/session.h"

namespace cadenza::engine {
namespace {

using test_util::EngineTest;
using test_util::greedy;
using test_util::random_prompt;
using test_util::run;

constexpr int32_t kImageAt = 6;
constexpr int32_t kImageTokens = 20;

std::shared_ptr<const std::vector<float>> random_embeddings(int32_t rows, int32_t n_embd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  auto v = std::make_shared<std::vector<float>>(static_cast<size_t>(rows) * n_embd);
  for (float& x : *v) x = d(rng);
  return v;
}

ImageInput image(int32_t n_embd, uint32_t seed, int32_t at = kImageAt) {
  ImageInput im;
  im.position = at;
  im.num_tokens = kImageTokens;
  im.embeddings = random_embeddings(kImageTokens, n_embd, seed);
  std::fill(im.digest.begin(), im.digest.end(), static_cast<uint8_t>(seed));
  return im;
}

class ImageInputTest : public EngineTest {
 protected:
  int32_t n_embd() const { return static_cast<int32_t>(loaded_->model->config().n_embd); }
  // 6 text tokens, 20 placeholders (id 0), 10 text tokens.
  std::vector<int32_t> prompt() const {
    std::vector<int32_t> p = random_prompt(kImageAt, 11);
    p.insert(p.end(), kImageTokens, 0);
    std::vector<int32_t> tail = random_prompt(10, 12);
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  }
  // Greedy decoding through model::Session with the embeddings (what `cadenza run --image` does).
  std::vector<int32_t> session_greedy(const std::vector<int32_t>& tokens, const ImageInput& im, int n) {
    // A bidirectional image must fit one pass: 7-token passes otherwise.
    const int32_t pass = im.bidirectional ? kImageTokens + 3 : 7;
    auto s = model::Session::create(*loaded_->model, {.max_tokens = 128, .max_batch_tokens = pass});
    EXPECT_TRUE(s.ok()) << s.error();
    auto logits = (*s)->eval(tokens, model::InputEmbeddings{im.position, im.num_tokens, *im.embeddings, im.bidirectional});
    std::vector<int32_t> out;
    while (logits && static_cast<int>(out.size()) < n) {
      out.push_back(static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin()));
      logits = (*s)->eval(std::span<const int32_t>(&out.back(), 1));
    }
    EXPECT_TRUE(logits.ok()) << logits.error();
    return out;
  }
  test_util::Generation run_one(EngineCore& e, const std::vector<int32_t>& p, const SamplingParams& sp,
                                std::vector<ImageInput> images) {
    auto id = e.add_request(p, sp, 0, {}, std::move(images));
    EXPECT_TRUE(id.ok()) << id.error();
    return run(e)[*id];
  }
};

TEST_F(ImageInputTest, GreedyEqualsTheSessionPathAcrossPromptChunks) {
  const ImageInput im = image(n_embd(), 1);
  const std::vector<int32_t> want = session_greedy(prompt(), im, 8);
  // Budgets that end prompt chunks before, inside and after the image.
  for (int32_t budget : {4, 9, 64}) {
    auto e = engine({.block_size = 4, .max_num_batched_tokens = budget, .max_num_seqs = 4});
    const test_util::Generation g = run_one(*e, prompt(), greedy(8), {im});
    EXPECT_EQ(g.tokens, want) << "budget " << budget;
  }
  // The embeddings matter (the test can fail): without them the placeholders are token 0.
  auto e = engine({.block_size = 4});
  EXPECT_NE(test_util::run_alone(*e, prompt(), greedy(8)).tokens, want);
}

// An image whose tokens attend to each other both ways (Gemma 3's): the scheduler never ends a
// prompt chunk inside it, so budgets that would cut it give the Session's greedy tokens, which
// differ from the causal image's; an image larger than a step leaves beside the decodes is
// refused.
TEST_F(ImageInputTest, BidirectionalImagesRunInOneStep) {
  ImageInput im = image(n_embd(), 1);
  im.bidirectional = true;
  const std::vector<int32_t> want = session_greedy(prompt(), im, 8);
  im.bidirectional = false;
  EXPECT_NE(session_greedy(prompt(), im, 8), want) << "the image's attention changed nothing";
  im.bidirectional = true;
  for (int32_t budget : {23, 30, 64}) {  // 23 and 30: a plain chunk ends inside the image
    auto e = engine({.block_size = 4, .max_num_batched_tokens = budget, .max_num_seqs = 4});
    const test_util::Generation g = run_one(*e, prompt(), greedy(8), {im});
    EXPECT_EQ(g.tokens, want) << "budget " << budget;
  }
  auto e = engine({.block_size = 4, .max_num_batched_tokens = 22, .max_num_seqs = 4});
  auto refused = e->add_request(prompt(), greedy(8), 0, {}, {im});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("20 tokens that attend to each other, more than the 19"), std::string::npos)
      << refused.error();
}

TEST_F(ImageInputTest, SampledImageRequestsAreBatchInvariant) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  p.seed = 99;
  p.max_tokens = 10;
  p.ignore_eos = true;
  p.n = 3;
  const ImageInput a = image(n_embd(), 1);
  const ImageInput b = image(n_embd(), 2);
  auto alone = [&](const ImageInput& im) {
    auto e = engine({.block_size = 4, .max_num_batched_tokens = 64, .max_num_seqs = 8});
    auto id = e->add_request(prompt(), p, 0, {}, {im});
    EXPECT_TRUE(id.ok());
    return test_util::run_all(*e);
  };
  const auto ga = alone(a);
  const auto gb = alone(b);
  // Both together with a small budget (chunks end inside the images).
  auto e = engine({.block_size = 4, .max_num_batched_tokens = 8, .max_num_seqs = 8});
  auto ia = e->add_request(prompt(), p, 0, {}, {a});
  auto ib = e->add_request(prompt(), p, 0, {}, {b});
  ASSERT_TRUE(ia.ok() && ib.ok());
  const auto both = test_util::run_all(*e);
  ASSERT_EQ(ga.size(), 3u);
  ASSERT_EQ(gb.size(), 3u);
  for (int32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(both.at({*ia, i}).tokens, ga.at({ga.begin()->first.first, i}).tokens) << i;
    EXPECT_EQ(both.at({*ib, i}).tokens, gb.at({gb.begin()->first.first, i}).tokens) << i;
  }
  // Different images, same text and seed: different samples.
  EXPECT_NE(ga.begin()->second.tokens, gb.begin()->second.tokens);
}

TEST_F(ImageInputTest, PrefixCacheHitsOnlyTheSameImage) {
  auto e = engine({.block_size = 4, .max_num_batched_tokens = 64});
  const ImageInput a = image(n_embd(), 1);
  const test_util::Generation first = run_one(*e, prompt(), greedy(6), {a});
  EXPECT_EQ(first.metrics.num_cached_prompt_tokens, 0);
  // The same image again: every full block of the prompt but the last token's is reused,
  // the image's included (36 prompt tokens, blocks of 4: 32 cached).
  const test_util::Generation again = run_one(*e, prompt(), greedy(6), {a});
  EXPECT_EQ(again.metrics.num_cached_prompt_tokens, 32);
  EXPECT_EQ(again.tokens, first.tokens);
  // Another image with the same token ids: only the block wholly before the image is shared.
  ImageInput b = image(n_embd(), 2);
  const test_util::Generation other = run_one(*e, prompt(), greedy(6), {b});
  EXPECT_EQ(other.metrics.num_cached_prompt_tokens, 4);
  // The same content under another digest does not hit either: the digest is the key.
  ImageInput a2 = a;
  a2.digest[0] ^= 1;
  EXPECT_EQ(run_one(*e, prompt(), greedy(6), {a2}).metrics.num_cached_prompt_tokens, 4);
  // The same image one position later (one more text token before it) is other KV.
  std::vector<int32_t> shifted = prompt();
  shifted.insert(shifted.begin() + kImageAt, 5);
  const test_util::Generation moved = run_one(*e, shifted, greedy(6), {image(n_embd(), 1, kImageAt + 1)});
  EXPECT_EQ(moved.metrics.num_cached_prompt_tokens, 4);
  // A text-only request with the placeholder ids does not pick up the image's blocks.
  EXPECT_EQ(test_util::run_alone(*e, prompt(), greedy(6)).metrics.num_cached_prompt_tokens, 4);
  EXPECT_EQ(e->stats().kv_usage, 0);
}

TEST_F(ImageInputTest, PreemptedImageRequestsRecomputeTheSameRows) {
  // Alone, then four at once in a pool that holds barely more than one: requests are preempted
  // and recompute their prompts (images included) from the start; the tokens do not change.
  std::vector<test_util::Generation> alone;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    auto e = engine({.block_size = 4, .max_num_batched_tokens = 64});
    alone.push_back(run_one(*e, prompt(), greedy(10), {image(n_embd(), seed)}));
  }
  auto e = engine({.num_kv_blocks = 14, .block_size = 4, .enable_prefix_caching = false,
                   .max_num_batched_tokens = 16, .max_num_seqs = 4, .max_model_len = 48});
  std::vector<RequestId> ids;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    auto id = e->add_request(prompt(), greedy(10), 0, {}, {image(n_embd(), seed)});
    ASSERT_TRUE(id.ok()) << id.error();
    ids.push_back(*id);
  }
  auto g = run(*e);
  EXPECT_GT(e->stats().num_preemptions, 0);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(g[ids[i]].tokens, alone[i].tokens) << i;
  EXPECT_EQ(e->stats().kv_usage, 0);
}

TEST_F(ImageInputTest, SpeculationKeepsTheGreedyOutput) {
  // n-gram drafts (from a repetitive tail of text after the image) verified in the same batches
  // as image rows: greedy output is the output without speculation.
  std::vector<int32_t> p = prompt();
  for (int i = 0; i < 3; ++i) p.insert(p.end(), {7, 8, 9, 10});
  const ImageInput im = image(n_embd(), 3);
  auto plain = engine({.block_size = 4, .max_num_batched_tokens = 8, .max_num_seqs = 4});
  const std::vector<int32_t> want = run_one(*plain, p, greedy(16), {im}).tokens;
  EngineConfig c{.block_size = 4, .max_num_batched_tokens = 8, .max_num_seqs = 4};
  c.speculative = {.method = SpeculativeMethod::kNgram, .num_speculative_tokens = 4,
                   .ngram_min = 1, .ngram_max = 3, .adaptive = false};
  auto spec = engine(c);
  EXPECT_EQ(run_one(*spec, p, greedy(16), {im}).tokens, want);
  EXPECT_GT(spec->stats().num_spec_draft_tokens, 0);
}

TEST_F(ImageInputTest, BadImagesAreRefused) {
  auto e = engine({.block_size = 4});
  auto refused = [&](std::vector<ImageInput> images) {
    auto id = e->add_request(prompt(), greedy(4), 0, {}, std::move(images));
    return id.ok() ? std::string() : id.error();
  };
  ImageInput past = image(n_embd(), 1, 30);  // 30 + 20 > 36
  EXPECT_NE(refused({past}).find("outside"), std::string::npos);
  ImageInput a = image(n_embd(), 1, 0), b = image(n_embd(), 2, 10);  // overlap
  EXPECT_NE(refused({a, b}).find("overlaps"), std::string::npos);
  ImageInput small = image(n_embd(), 1);
  small.embeddings = random_embeddings(kImageTokens - 1, n_embd(), 3);
  EXPECT_NE(refused({small}).find("embedding values"), std::string::npos);
  ImageInput none = image(n_embd(), 1);
  none.embeddings = nullptr;
  EXPECT_NE(refused({none}).find("embedding values"), std::string::npos);
  EXPECT_FALSE(e->has_work());
}

}  // namespace
}  // namespace cadenza::engine
