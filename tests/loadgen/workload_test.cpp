#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "temp_dir.h"
#include "test_models.h"

#include "gguf/gguf.h"
#include "loadgen/workload.h"
#include "synth/synth.h"
#include "tokenizer/tokenizer.h"

namespace cadenza::loadgen {
namespace {

size_t words(const std::string& s) {
  std::istringstream in(s);
  std::string w;
  size_t n = 0;
  while (in >> w) ++n;
  return n;
}

TEST(Workload, RandomWordsWithoutTokenizer) {
  WorkloadOptions o;
  o.input.mean = 50;
  o.output.mean = 20;
  o.seed = 3;
  auto w = make_workload(o, nullptr, 5);
  ASSERT_TRUE(w);
  ASSERT_EQ(w->size(), 5u);
  for (const auto& item : *w) {
    EXPECT_EQ(words(item.prompt), 50u);
    EXPECT_EQ(item.prompt_tokens, 50);
    EXPECT_FALSE(item.prompt_tokens_exact);
    EXPECT_EQ(item.max_tokens, 20);
    ASSERT_EQ(item.messages.size(), 1u);
    EXPECT_EQ(item.messages[0]["role"], "user");
  }
  EXPECT_NE((*w)[0].prompt, (*w)[1].prompt);
  auto again = make_workload(o, nullptr, 5);
  EXPECT_EQ((*again)[4].prompt, (*w)[4].prompt);  // seeded
}

TEST(Workload, LengthDistributions) {
  std::mt19937_64 rng(1);
  LengthSpec u{.mean = 100, .dist = LenDist::uniform, .spread = 0.2};
  LengthSpec n{.mean = 100, .dist = LenDist::normal, .spread = 0.2, .min_len = 90, .max_len = 120};
  double sum = 0;
  for (int i = 0; i < 2000; ++i) {
    const int32_t a = draw_length(u, rng);
    EXPECT_GE(a, 80);
    EXPECT_LE(a, 120);
    sum += a;
    const int32_t b = draw_length(n, rng);
    EXPECT_GE(b, 90);
    EXPECT_LE(b, 120);
  }
  EXPECT_NEAR(sum / 2000, 100, 1.5);
  EXPECT_EQ(draw_length({.mean = 7}, rng), 7);
}

TEST(Workload, SharedPrefixGroups) {
  WorkloadOptions o;
  o.input.mean = 10;
  o.prefix_groups = 3;
  o.prefix_len = 40;
  auto w = make_workload(o, nullptr, 9);
  ASSERT_TRUE(w);
  std::set<std::string> prefixes, users;
  for (size_t i = 0; i < w->size(); ++i) {
    const auto& item = (*w)[i];
    ASSERT_EQ(item.messages.size(), 2u);
    EXPECT_EQ(item.messages[0]["role"], "system");
    EXPECT_EQ(item.group, static_cast<int32_t>(i % 3));
    EXPECT_EQ(item.messages[0]["content"], (*w)[i % 3].messages[0]["content"]);
    EXPECT_EQ(words(item.messages[0]["content"].get<std::string>()), 40u);
    EXPECT_EQ(item.prompt_tokens, 50);
    prefixes.insert(item.messages[0]["content"].get<std::string>());
    users.insert(item.messages[1]["content"].get<std::string>());
  }
  EXPECT_EQ(prefixes.size(), 3u);
  EXPECT_EQ(users.size(), 9u);
}

// Writes `text` to `name` in this test's own temp folder.
std::string write_temp(const test::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

TEST(Workload, DatasetShapes) {
  const test::TempDir dir("loadgen-dataset");
  const std::string path = write_temp(
      dir, "dataset.jsonl",
      R"({"prompt": "one two three", "output_len": 5})"
      "\n"
      "\n"
      R"({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]})"
      "\n"
      R"({"conversations": [{"from": "human", "value": "what is up"}, {"from": "gpt", "value": "a b c d e f g h"}]})"
      "\n");
  WorkloadOptions o;
  o.dataset = path;
  o.output.mean = 33;
  auto w = make_workload(o, nullptr, 6);
  ASSERT_TRUE(w) << w.error();
  ASSERT_EQ(w->size(), 6u);
  int seen_prompt = 0, seen_messages = 0, seen_sharegpt = 0;
  for (const auto& item : *w) {
    if (item.prompt == "one two three") {
      ++seen_prompt;
      EXPECT_EQ(item.max_tokens, 5);
    } else if (item.messages.size() == 2) {
      ++seen_messages;
      EXPECT_EQ(item.messages[0]["content"], "be brief");
      EXPECT_EQ(item.max_tokens, 33);
    } else {
      ++seen_sharegpt;
      EXPECT_EQ(item.messages[0]["content"], "what is up");
      EXPECT_EQ(item.max_tokens, 8);  // estimated length of the reply (8 words)
    }
  }
  EXPECT_EQ(seen_prompt, 2);
  EXPECT_EQ(seen_messages, 2);
  EXPECT_EQ(seen_sharegpt, 2);
  o.output_len_explicit = true;
  auto forced = make_workload(o, nullptr, 3);
  ASSERT_TRUE(forced);
  ASSERT_EQ(forced->size(), 3u);
  for (const auto& item : *forced) EXPECT_EQ(item.max_tokens, 33);
}

TEST(Workload, DatasetErrorsNameTheLine) {
  WorkloadOptions o;
  const test::TempDir dir("loadgen-bad-dataset");
  o.dataset = write_temp(dir, "bad.jsonl", "{\"prompt\": \"ok\"}\n{\"x\": 1}\n");
  auto w = make_workload(o, nullptr, 1);
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().find(":2:"), std::string::npos) << w.error();
  o.dataset = "/nonexistent/cadenza.jsonl";
  EXPECT_FALSE(make_workload(o, nullptr, 1));
}

TEST(Workload, TokenizerPromptsHitTheLength) {
  // The tiny test model: the built-in byte-level vocabulary, small enough to write fast.
  const synth::SynthOptions opts = test::tiny_model_options(1);
  const test::TempDir dir("loadgen-vocab");
  const std::string model = dir.file("vocab.gguf");
  auto written = synth::write_synthetic_model(opts, model);
  ASSERT_TRUE(written) << written.error();
  auto file = gguf::GgufFile::open(model);
  ASSERT_TRUE(file) << file.error();
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok) << tok.error();
  WorkloadOptions o;
  o.input.mean = 64;
  auto w = make_workload(o, tok->get(), 4);
  ASSERT_TRUE(w);
  ASSERT_EQ(w->size(), 4u);
  for (const auto& item : *w) {
    EXPECT_TRUE(item.prompt_tokens_exact);
    EXPECT_EQ(static_cast<int32_t>((*tok)->encode(item.prompt, false, false).size()),
              item.prompt_tokens);
    EXPECT_NEAR(item.prompt_tokens, 64, 2);
  }
}

}  // namespace
}  // namespace cadenza::loadgen
